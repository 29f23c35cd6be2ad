// "HOST:PORT" taken apart, the way --listen style flags are written.
//
//   std::optional<HostPort> hp = SplitHostPort("[::1]:7311");  // {"::1", "7311"}
#ifndef STAGEFRONTIER_DAEMON_COMMON_HOST_PORT_H_
#define STAGEFRONTIER_DAEMON_COMMON_HOST_PORT_H_

#include <optional>
#include <string>

namespace stagefrontier {

struct HostPort {
  std::string host;  // an IPv6 address without its brackets
  std::string port;  // as written, not checked
};

// Splits `address` at its last colon and takes the brackets off "[v6-address]". nullopt when
// there is no colon.
std::optional<HostPort> SplitHostPort(const std::string& address);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_HOST_PORT_H_
