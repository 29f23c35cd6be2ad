#include "daemon/common/fd_io.h"

#include <unistd.h>

#include <cerrno>

namespace stagefrontier {

int WriteFully(int fd, absl::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return ENOSPC;
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace stagefrontier
