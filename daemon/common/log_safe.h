// Makes text that came from outside (a job id before it was validated, a node name, a peer
// address, a message a sidecar relayed) safe to put into a log line or an error message:
// control characters and NUL bytes are escaped, so that nobody can forge log lines, and the
// text is cut to a bounded length.
//
//   spdlog::info("sidecar {} connected", LogSafe(hello.node()));
#ifndef STAGEFRONTIER_DAEMON_COMMON_LOG_SAFE_H_
#define STAGEFRONTIER_DAEMON_COMMON_LOG_SAFE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace stagefrontier {

// C-style escapes for quotes, backslashes and non-printable bytes (absl::CHexEscape); at most
// `max_bytes` of the input are kept, "...(N bytes)" says how long it really was.
std::string LogSafe(absl::string_view text, size_t max_bytes = 128);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_LOG_SAFE_H_
