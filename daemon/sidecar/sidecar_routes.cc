#include "daemon/sidecar/sidecar_routes.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "shm/record_limits.h"

namespace stagefrontier {

absl::StatusOr<std::vector<SidecarRoute>> ParseRoutes(const std::vector<std::string>& flags) {
  std::vector<SidecarRoute> out;
  std::set<std::string> seen;
  for (const std::string& f : flags) {
    const size_t eq = f.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == f.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", f, "\" is not JOB=ADDRESS (e.g. run42=10.0.0.5:7311)"));
    }
    SidecarRoute r{f.substr(0, eq), f.substr(eq + 1)};
    if (!shm::ValidJobId(r.job)) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", r.job, "\" in \"", f, "\" is not a job id a stub would use"));
    }
    if (!seen.insert(r.job).second) {
      return absl::InvalidArgumentError(absl::StrCat("job \"", r.job, "\" is routed twice"));
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace stagefrontier
