// Reduces full-profiler traces to StageFrontier's coarse stages, so that the same engine can
// account them and the two views can be compared (docs/cli.md, `stagefrontier reduce-trace`).
//
// Input: Chrome trace JSON as torch.profiler (Kineto) exports it, one file per rank: a
// top-level object with "traceEvents" (or a bare array of events). Steps come from the
// complete ("ph":"X") events named "ProfilerStep#N" (prof.step() each iteration); stages from
// the ranges the stub emits when asked to annotate (stagefrontier.torch with --annotate):
// "stagefrontier:<stage>". Within step N, stage k ends where its last range ends; a stage
// without a range ends where the previous one ended (boundaries never go back). The rank and
// world size come from "distributedInfo" when present.
//
// Beside chrome_trace so that both the CLI (daemon/analyze/trace_run.h, one file per rank into a
// recorded run) and the operator profiles of captures (operator_profile.h) use it.
//
//   absl::StatusOr<RankTrace> t = ReduceChromeTrace(text, schema, "trace_rank0.json");
//   for (const auto& [step, boundaries] : t->steps) { ... }  // b[0..S] in ns
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_TRACE_REDUCE_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_TRACE_REDUCE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/captures/chrome_trace.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

inline constexpr absl::string_view kStageAnnotationPrefix = "stagefrontier:";

// One rank's trace, reduced.
struct RankTrace {
  int32_t rank = -1;        // from distributedInfo; -1 if the trace does not say
  int32_t world_size = -1;  // likewise
  std::map<int64_t, std::vector<int64_t>> steps;  // step -> boundaries b[0..S], ns
  uint64_t events = 0;                            // events in the file
  uint64_t unknown_stage_ranges = 0;              // "stagefrontier:x" with x not in the schema
  uint64_t ranges_outside_steps = 0;              // stage ranges that start in no ProfilerStep
  std::string step_process;  // the "pid" of the ProfilerStep events (the trainer's CPU side)
};

// Parses one trace. Fails with InvalidArgument naming `name` and what is wrong: not JSON (with
// the byte offset), no event list, an event whose ts/dur is missing or not a number, a
// negative duration, a ProfilerStep number that is not an integer, no ProfilerStep events at
// all, or no stage annotation at all.
[[nodiscard]] absl::StatusOr<RankTrace> ReduceChromeTrace(absl::string_view json,
                                                          const StageSchema& schema,
                                                          const std::string& name);

// The same over a trace already parsed (ParseChromeTrace), for callers that also read its
// events. Fails as ReduceChromeTrace after parsing.
[[nodiscard]] absl::StatusOr<RankTrace> ReduceParsedTrace(const ChromeTrace& trace,
                                                          const StageSchema& schema,
                                                          const std::string& name);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_TRACE_REDUCE_H_
