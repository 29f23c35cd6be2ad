// What the engine consumes: one step's boundary times from each reporting rank, each on that
// rank's own monotonic clock (docs/accounting.md, "Per step: exact, integer, clock-free"). No
// clock synchronization is assumed: the engine only ever subtracts two timestamps of the
// same rank.
//
//   StepInput in;
//   in.step = 42;
//   RankStep r{.rank = 3, .boundaries_ns = {t0, t1, t2, t3, t4, t5}, .probe = {}};
//   in.ranks.push_back(r);
//   absl::Status s = ValidateRankStep(schema, /*world_size=*/16, in.ranks[0]);
// (Compiled and run by tests/docs/header_examples_test.cc.)
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_STEP_INPUT_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_STEP_INPUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

// A collective observed by the probe, on the rank's own clock: issued in stage `stage`, the
// rank entered it (its stream reached it) at `enter_ns` and saw it complete at `exit_ns`.
// exit - enter is how long this rank waited for the others plus the transfer: the rank with
// the shortest wait arrived last. A span that does not lie inside a stage allowed for its
// operation is a bracketing violation (probe_bracketing.h), not an input error.
struct ProbeSpan {
  uint32_t stage = 0;
  int64_t enter_ns = 0;
  int64_t exit_ns = 0;
  uint16_t op = kAnyOp;  // shm::v2::CollectiveOp; kAnyOp when the source does not say
  uint64_t bytes = 0;    // 0 when unknown
  int64_t call_ns = 0;   // when the rank called the collective (live probe data only)
  static constexpr uint16_t kAnyOp = 0xFFFF;
};

struct RankStep {
  int32_t rank = 0;
  // b[0] = step start, b[k] = end of stage k (k = 1..S). Stages entered several times in a
  // step (gradient accumulation) are already summed by the stub.
  std::vector<int64_t> boundaries_ns;
  std::vector<ProbeSpan> probe;
};

struct StepInput {
  int64_t step = 0;
  std::vector<RankStep> ranks;
  // Some rank ran a profiler capture in this step (its record carries kRecordTraceCaptured):
  // the step is slower on the captured ranks for the profiler's sake, not the job's.
  bool captured = false;
};

// The stage (0-based) whose span [b[k], b[k+1]] holds time t: the first k with t <= b[k+1],
// the last stage for times after the step. `boundaries` holds S+1 >= 2 times.
uint32_t StageAt(const std::vector<int64_t>& boundaries, int64_t t);

// Checks one rank's record against the schema: rank in [0, world_size), exactly S+1
// boundaries, no negative stage duration, probe spans naming a stage of the schema with
// enter <= exit, no further than a day from the step. Returns
// InvalidArgument (or OutOfRange for the rank) with a message naming the stage and value.
[[nodiscard]] absl::Status ValidateRankStep(const StageSchema& schema, int32_t world_size,
                                            const RankStep& record);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_STEP_INPUT_H_
