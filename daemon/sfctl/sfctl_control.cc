#include "daemon/sfctl/sfctl_control.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace stagefrontier {
namespace {

struct ControlFlags {
  std::string job;
  bool pause = false;
  bool resume = false;
  uint32_t sample = 0;
  int trace_rank = -1;
  std::string trace_steps;
  int window_steps = 0;
  double excess_z = 0;
  double clear_share = 0;
  int64_t stall_after_ms = 0;
};

// The one action the flags ask for, into *cmd; the usage error's text when not exactly one.
std::string BuildControl(const ControlFlags& f, v1::ControlCommand* cmd) {
  cmd->set_job(f.job);
  int actions = 0;
  if (f.pause) ++actions, cmd->set_pause(true);
  if (f.resume) ++actions, cmd->set_resume(true);
  if (f.sample > 0) ++actions, cmd->set_sample_every(f.sample);
  if (f.trace_rank >= 0) {
    ++actions;
    std::vector<std::string> parts = absl::StrSplit(f.trace_steps, ':');
    int64_t first = 0, last = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &first) ||
        !absl::SimpleAtoi(parts[1], &last)) {
      return "--trace-steps wants FIRST:LAST, got \"" + f.trace_steps + "\"";
    }
    cmd->mutable_trace()->set_rank(f.trace_rank);
    cmd->mutable_trace()->set_first_step(first);
    cmd->mutable_trace()->set_last_step(last);
  }
  if (f.window_steps > 0 || f.excess_z > 0 || f.clear_share > 0 || f.stall_after_ms != 0) {
    ++actions;
    cmd->mutable_config()->set_stall_after_ms(f.stall_after_ms);
    cmd->mutable_config()->set_window_steps(f.window_steps);
    cmd->mutable_config()->set_excess_z(f.excess_z);
    cmd->mutable_config()->set_clear_share(f.clear_share);
  }
  if (actions != 1) {
    return "control wants exactly one action (--pause, --resume, --sample-every, "
           "--trace-rank with --trace-steps, or thresholds and --stall-after-ms)";
  }
  return "";
}

}  // namespace

SfctlCommand ControlCommand() {
  return {"control", "runtime control of a job", [](CLI::App* sub) -> SfctlRun {
            auto f = std::make_shared<ControlFlags>();
            sub->add_option("--job", f->job, "job id")->required();
            sub->add_flag("--pause", f->pause, "stop stub recording");
            sub->add_flag("--resume", f->resume, "resume stub recording");
            sub->add_option("--sample-every", f->sample, "stubs record one step in N");
            sub->add_option("--trace-rank", f->trace_rank, "ask this rank for a detailed trace");
            sub->add_option("--trace-steps", f->trace_steps, "of steps FIRST:LAST");
            sub->add_option("--window-steps", f->window_steps, "new verdict window");
            sub->add_option("--excess-z", f->excess_z, "new excess threshold in noise scales");
            sub->add_option("--clear-share", f->clear_share, "new CLEAR share");
            sub->add_option("--stall-after-ms", f->stall_after_ms,
                            "the job's own stall limit (-1: the default again)")
                ->check(CLI::Range(int64_t{-1}, int64_t{86'400'000}));
            return [f](const SfctlCall& call) {
              v1::ControlCommand cmd;
              if (std::string bad = BuildControl(*f, &cmd); !bad.empty()) {
                return SfctlUsageError(bad);
              }
              return call.Unary(&v1::Query::Stub::Control, cmd,
                                [](const v1::ControlReply& r) { return r.message() + "\n"; });
            };
          }};
}

}  // namespace stagefrontier
