#include "daemon/sfctl/sfctl_steps.h"

#include <cstdint>
#include <memory>
#include <string>

#include "daemon/sfctl/sfctl_render.h"

namespace stagefrontier {
namespace {

struct StepsFlags {
  std::string job;
  int64_t from = 0;
  int64_t to = INT64_MAX;
  int limit = 0;
};

}  // namespace

SfctlCommand StepsCommand() {
  return {"steps", "per-step accounting", [](CLI::App* sub) -> SfctlRun {
            auto f = std::make_shared<StepsFlags>();
            sub->add_option("--job", f->job, "job id")->required();
            sub->add_option("--from", f->from, "first step");
            sub->add_option("--to", f->to, "last step");
            sub->add_option("--limit", f->limit, "at most this many steps (default 1000)");
            return [f](const SfctlCall& call) {
              v1::GetStepsRequest req;
              req.set_job(f->job);
              req.set_from_step(f->from);
              req.set_to_step(f->to);
              req.set_limit(f->limit);
              return call.Unary(&v1::Query::Stub::GetSteps, req, RenderSteps);
            };
          }};
}

}  // namespace stagefrontier
