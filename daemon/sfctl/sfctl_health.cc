#include "daemon/sfctl/sfctl_health.h"

#include <memory>
#include <string>

#include "daemon/sfctl/sfctl_render.h"

namespace stagefrontier {

SfctlCommand HealthCommand() {
  return {"health", "per-rank health", [](CLI::App* sub) -> SfctlRun {
            auto job = std::make_shared<std::string>();
            sub->add_option("--job", *job, "job id")->required();
            return [job](const SfctlCall& call) {
              v1::GetHealthRequest req;
              req.set_job(*job);
              return call.Unary(&v1::Query::Stub::GetHealth, req, RenderHealth);
            };
          }};
}

}  // namespace stagefrontier
