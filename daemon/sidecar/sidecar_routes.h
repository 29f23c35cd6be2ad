// Which coordinator each job's records go to, from the sidecar's repeated `--route JOB=ADDR`
// flags: a cluster that runs one coordinator per job (or per set of jobs, `--jobs` on the
// coordinator) lets one sidecar per node serve ranks of several jobs (docs/architecture.md,
// "Beyond one coordinator").
//
//   absl::StatusOr<std::vector<SidecarRoute>> r = ParseRoutes({"jobA=10.0.0.1:7311"});
#ifndef STAGEFRONTIER_DAEMON_SIDECAR_SIDECAR_ROUTES_H_
#define STAGEFRONTIER_DAEMON_SIDECAR_SIDECAR_ROUTES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace stagefrontier {

struct SidecarRoute {
  std::string job;
  std::string coordinator;  // a gRPC address
};

// Parses `JOB=ADDRESS` flags in order. InvalidArgument, naming the flag, when one has no '=',
// an empty side, a job id the stub would not accept, or a job given twice.
[[nodiscard]] absl::StatusOr<std::vector<SidecarRoute>> ParseRoutes(
    const std::vector<std::string>& flags);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIDECAR_SIDECAR_ROUTES_H_
