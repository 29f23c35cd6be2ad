// How every sfctl subcommand ends on a failed call: the message on standard error and the
// documented exit status (docs/cli.md): 3 when the coordinator cannot be reached, 1 when it
// refused. A port that answers HTTP/1 (the coordinator's /metrics or web view port) is named as
// such rather than with gRPC's transport words.
//
//   if (!s.ok()) return ReportCallError(s, coordinator);
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_STATUS_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_STATUS_H_

#include <string>

#include "grpcpp/grpcpp.h"

namespace stagefrontier {

inline constexpr int kExitRefused = 1;
inline constexpr int kExitUnreachable = 3;

// The line sfctl prints for `s` (without "sfctl: "), `coordinator` being the address it dialled
// ("" when the caller does not know it).
std::string CallErrorText(const grpc::Status& s, const std::string& coordinator);

// Prints CallErrorText to standard error and returns the exit status.
int ReportCallError(const grpc::Status& s, const std::string& coordinator = "");

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_STATUS_H_
