// The operators that ran inside one stage of each captured step on one rank, taken from a
// profiler trace that carries the stub's stage annotations ("stagefrontier:<stage>", from
// stagefrontier.torch --annotate) and torch.profiler's "ProfilerStep#N" ranges.
//
//   absl::StatusOr<ChromeTrace> t = ParseChromeTrace(text, "trace_rank3.json");
//   absl::StatusOr<OperatorProfile> p = ProfileOperators(*t, schema, "data", "trace_rank3.json");
//   for (const auto& [path, op] : p->operators) { ... op.per_step[i].duration_ns ... }
//
// An operator is a complete event of the trainer's process (the ProfilerStep events' "pid";
// GPU kernels on device tracks are left out) that begins inside the stage's span of a step,
// on any of its threads (autograd runs backward on its own thread). It is named by its call
// path: the names of the events enclosing it on its thread inside the stage, outermost first,
// joined by " > ". Durations are inclusive (a module's time holds its operators').
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_OPERATOR_PROFILE_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_OPERATOR_PROFILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/captures/chrome_trace.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

inline constexpr const char* kCallPathSeparator = " > ";

// One operator (call path) in one step: every occurrence in the stage summed.
struct OperatorStep {
  int64_t duration_ns = 0;  // total time of its occurrences
  int64_t begin_ns = -1;    // first occurrence's start, from the stage's start
  int64_t end_ns = -1;      // last occurrence's end, from the stage's start
  int32_t occurrences = 0;
  // The call path of the operator that ended last before this one began, on its thread and
  // under the same parent ("" when it is the first there): its predecessor for blame.
  std::string predecessor;
};

struct OperatorProfile {
  int32_t rank = -1;
  std::string stage;
  std::vector<int64_t> steps;              // captured steps where the stage has a span
  std::vector<int64_t> stage_duration_ns;  // by steps[i]
  // Call path -> one entry per steps[i] (occurrences 0 where it did not run that step).
  std::map<std::string, std::vector<OperatorStep>> operators;
};

// Profiles stage `stage` of `trace`. Fails with InvalidArgument naming `name` when the stage
// is not in the schema, or when the trace has no ProfilerStep or stage annotation (as
// ReduceParsedTrace says), or no step where the stage lasted.
[[nodiscard]] absl::StatusOr<OperatorProfile> ProfileOperators(const ChromeTrace& trace,
                                                               const StageSchema& schema,
                                                               const std::string& stage,
                                                               const std::string& name);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_OPERATOR_PROFILE_H_
