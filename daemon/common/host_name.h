// This machine's host name: the default node name of the sidecar and the sweep, and the host a
// sidecar reports under its node name.
//
//   std::string host = HostName();
#ifndef STAGEFRONTIER_DAEMON_COMMON_HOST_NAME_H_
#define STAGEFRONTIER_DAEMON_COMMON_HOST_NAME_H_

#include <string>

namespace stagefrontier {

// gethostname(2); "" if it fails.
std::string HostName();

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_HOST_NAME_H_
