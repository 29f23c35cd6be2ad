// Writing a whole buffer to a file descriptor: write(2) may write less than asked and may be
// interrupted, so every writer needs the same loop.
//
//   if (int err = WriteFully(fd, bytes); err != 0) return Error(std::strerror(err));
#ifndef STAGEFRONTIER_DAEMON_COMMON_FD_IO_H_
#define STAGEFRONTIER_DAEMON_COMMON_FD_IO_H_

#include "absl/strings/string_view.h"

namespace stagefrontier {

// Writes all of `data` at the descriptor's position, going on after EINTR. Returns 0, or the
// errno that stopped it (ENOSPC for a write that made no progress, as a full disk does).
int WriteFully(int fd, absl::string_view data);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_FD_IO_H_
