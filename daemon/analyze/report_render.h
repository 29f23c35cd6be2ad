// Renders an engine report for people (aligned text) and for machines (JSON).
//
//   std::string text = RenderReportText(run_info, engine->Report(), window_verdicts);
//   std::string json = RenderReportJson(run_info, engine->Report(), window_verdicts);
#ifndef STAGEFRONTIER_DAEMON_ANALYZE_REPORT_RENDER_H_
#define STAGEFRONTIER_DAEMON_ANALYZE_REPORT_RENDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/accounting/engine.h"

namespace stagefrontier {

struct RunInfo {
  std::string source;  // file name
  std::string job;
  int32_t world_size = 0;
  int64_t steps = 0;
  int64_t records = 0;
  // Profiled steps (marked captured in a journal), ascending: left out of the evidence, so a
  // window spanning them says how many.
  std::vector<int64_t> profiled_steps;
};

std::string RenderReportText(const RunInfo& info, const StageSchema& schema,
                             const JobReport& report, const std::vector<Verdict>& windows);

// Stable field names (docs/analyze.md); durations in nanoseconds.
std::string RenderReportJson(const RunInfo& info, const StageSchema& schema,
                             const JobReport& report, const std::vector<Verdict>& windows);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ANALYZE_REPORT_RENDER_H_
