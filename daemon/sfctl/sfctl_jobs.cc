#include "daemon/sfctl/sfctl_jobs.h"

#include "daemon/sfctl/sfctl_render.h"

namespace stagefrontier {

SfctlCommand JobsCommand() {
  return {"jobs", "list jobs", [](CLI::App*) -> SfctlRun {
            return [](const SfctlCall& call) {
              return call.Unary(&v1::Query::Stub::ListJobs, v1::ListJobsRequest(), RenderJobs);
            };
          }};
}

}  // namespace stagefrontier
