#include "daemon/sfctl/sfctl_capture.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace stagefrontier {
namespace {

struct CaptureFlags {
  std::string job;
  std::string ranks;
  uint32_t steps = 0;
};

}  // namespace

SfctlCommand CaptureCommand() {
  return {"capture",
          "ask ranks for a profiler capture of the same future steps (one per job at a time)",
          [](CLI::App* sub) -> SfctlRun {
            auto f = std::make_shared<CaptureFlags>();
            sub->add_option("--job", f->job, "job id")->required();
            sub->add_option("--ranks", f->ranks, "comma-separated ranks, e.g. 3,7")->required();
            sub->add_option("--steps", f->steps, "steps to capture (default: the coordinator's)");
            return [f](const SfctlCall& call) {
              v1::ControlCommand cmd;
              cmd.set_job(f->job);
              std::vector<int32_t> ranks;
              std::string bad;
              if (!ParseRankList(f->ranks, &ranks, &bad)) {
                return SfctlUsageError("--ranks wants numbers, got \"" + bad + "\"");
              }
              for (int32_t r : ranks) cmd.mutable_capture()->add_ranks(r);
              cmd.mutable_capture()->set_steps(f->steps);
              return call.Unary(&v1::Query::Stub::Control, cmd,
                                [](const v1::ControlReply& r) { return r.message() + "\n"; });
            };
          }};
}

}  // namespace stagefrontier
