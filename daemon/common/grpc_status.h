// absl::Status to grpc::Status at a service's edge: the codes are the same numbers (both follow
// google.rpc.Code), the message is kept.
//
//   return ToGrpcStatus(store.Accept(chunk).status());
#ifndef STAGEFRONTIER_DAEMON_COMMON_GRPC_STATUS_H_
#define STAGEFRONTIER_DAEMON_COMMON_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace stagefrontier {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_GRPC_STATUS_H_
