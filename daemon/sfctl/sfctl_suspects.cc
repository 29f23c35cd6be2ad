#include "daemon/sfctl/sfctl_suspects.h"

#include <memory>
#include <string>

#include "daemon/sfctl/sfctl_render.h"

namespace stagefrontier {
namespace {

struct SuspectsFlags {
  std::string job;
  int window = 0;
};

}  // namespace

SfctlCommand SuspectsCommand() {
  return {"suspects", "verdict and suspects of a job's window", [](CLI::App* sub) -> SfctlRun {
            auto f = std::make_shared<SuspectsFlags>();
            sub->add_option("--job", f->job, "job id")->required();
            sub->add_option("--window", f->window,
                            "re-account the last N steps (0: current window)");
            return [f](const SfctlCall& call) {
              v1::GetSuspectsRequest req;
              req.set_job(f->job);
              req.set_window(f->window);
              return call.Unary(&v1::Query::Stub::GetSuspects, req, RenderSuspects);
            };
          }};
}

}  // namespace stagefrontier
