#include "daemon/sfctl/sfctl_status.h"

#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace stagefrontier {
namespace {

bool Unreachable(const grpc::Status& s) {
  return s.error_code() == grpc::UNAVAILABLE || s.error_code() == grpc::DEADLINE_EXCEEDED;
}

}  // namespace

std::string CallErrorText(const grpc::Status& s, const std::string& coordinator) {
  const std::string at = coordinator.empty() ? "" : absl::StrCat(" at ", coordinator);
  // gRPC's words for an HTTP/1 server: "Trying to connect an http1.x server", or (1.51, for a
  // server that answers the preface with an HTTP/1 error) "Failed parsing HTTP/2".
  if (absl::StrContains(s.error_message(), "http1.x server") ||
      absl::StrContains(s.error_message(), "Failed parsing HTTP/2")) {
    return absl::StrCat("the address", at,
                        " answers plain HTTP, not gRPC: is it the coordinator's /metrics or web "
                        "view port? Point --coordinator at its gRPC port (--listen, 7311 by "
                        "default)");
  }
  if (Unreachable(s))
    return absl::StrCat("cannot reach the coordinator", at, ": ", s.error_message());
  return s.error_message();
}

int ReportCallError(const grpc::Status& s, const std::string& coordinator) {
  std::cerr << "sfctl: " << CallErrorText(s, coordinator) << "\n";
  return Unreachable(s) ? kExitUnreachable : kExitRefused;
}

}  // namespace stagefrontier
