// Detector health: when the coordinator's verdicts for a job cannot be trusted, it says so by
// name instead of guessing. Judged once per verdict window from the steps accounted in it and
// the stubs' counters (carried by the sidecars' health reports). A silently broken detector
// (every score NaN, nothing said) is what users of other straggler tools report; this names
// each way the input can be unfit.
//
// Conditions (kConditions; docs/operations.md explains each and its fix):
//   clock_backwards   a rank's records went back in time (a stage ending before it started,
//                     a step starting before the previous ended)
//   clock_jump        a rank's records ended in the future of the node's monotonic clock
//   stage_always_zero a declared stage lasted (almost) 0 on every rank in every step of the
//                     window
//   sync_never_waits  ranks reach a sync stage at different times but it lasts the same on
//                     all of them: the wait is not inside it (an async collective?)
//   too_few_steps     too few steps for the baselines (warm-up) or too few complete steps in
//                     the window
//   records_dropped   a rank lost more than a tenth of its records in the window
//   layout_rejected   the ranks' declared layouts do not fit together (set_layout_problem):
//                     the job is accounted as one group, comparing ranks that may do
//                     different work
//
//   DetectorHealth health(schema, {});
//   health.AddStep(input, /*partial=*/false);         // every accounted step
//   auto now = health.CloseWindow(rank_counters, steps_accounted);  // when a window closes
//   for (const DetectorCondition& c : now) verdict.unreliable.push_back(c.name);
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_DETECTOR_HEALTH_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_DETECTOR_HEALTH_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/accounting/next_wait.h"
#include "daemon/accounting/step_input.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

inline constexpr std::array<const char*, 7> kDetectorConditions = {
    "clock_backwards", "clock_jump",      "stage_always_zero", "sync_never_waits",
    "too_few_steps",   "records_dropped", "layout_rejected"};

struct DetectorCondition {
  std::string name;    // one of kDetectorConditions
  std::string detail;  // what was seen, with the ranks or stages, and what to do
};

// A rank's stub counters, cumulative (as the sidecar reports them).
struct RankRecordCounters {
  uint64_t accepted = 0;  // records the coordinator accepted
  uint64_t dropped = 0;   // dropped by the stub (ring full) or refused by the sidecar
  uint64_t clock_backwards = 0;
  uint64_t clock_ahead = 0;
};

struct DetectorHealthOptions {
  int warmup_steps = 16;  // the engine's warm-up (EngineConfig::warmup_steps)
  // stage_always_zero: a stage "lasts" when it reaches this on some rank in some step (an
  // empty stage scope, with the loop around it, measures a few microseconds). The stage is
  // "always zero" when it lasted in at most this fraction of the window's steps: a process
  // descheduled inside an empty scope on a busy node must not hide the condition.
  int64_t zero_stage_ns = 10'000;
  double zero_stage_max_fraction = 0.05;
  int min_complete_steps = 10;  // per window
  double max_dropped_fraction = 0.1;
  // sync_never_waits: judged when the median arrival skew at the sync stage is at least
  // this long and this fraction of the median step; fires when the median spread of the sync
  // stage's durations is below sync_absorbed_fraction of that skew.
  int64_t min_arrival_skew_ns = 200'000;
  double min_arrival_skew_fraction = 0.01;
  double sync_absorbed_fraction = 0.1;
  // With sync groups: a sync stage under this on every rank of a group in a step is one the
  // group's role leaves empty, not judged for that group (the verdict's evidence skips it too).
  int64_t role_empty_ns = kEmptyWaitNs;
};

class DetectorHealth {
 public:
  explicit DetectorHealth(StageSchema schema, DetectorHealthOptions options = {});

  // One accounted step (partial: some rank was missing).
  void AddStep(const StepInput& input, bool partial);
  // Judges the steps added since the previous call and the counters' growth since then
  // (`ranks` indexed by rank; cumulative). Returns the conditions that hold now, which
  // current() keeps until the next call.
  const std::vector<DetectorCondition>& CloseWindow(const std::vector<RankRecordCounters>& ranks,
                                                    int64_t steps_accounted);
  const std::vector<DetectorCondition>& current() const { return current_; }

  // The job's sync groups (group_of_rank[r]; empty: one group): a sync stage's arrival skew
  // is judged inside each group, since a stage that synchronizes a group never waits on the
  // ranks of another (pipeline stages reach it at different times by design).
  void set_groups(std::vector<int32_t> group_of_rank);
  // Why the ranks' layouts were refused ("": they were not); held until cleared.
  void set_layout_problem(std::string problem) { layout_problem_ = std::move(problem); }
  const std::string& layout_problem() const { return layout_problem_; }

 private:
  const StageSchema schema_;
  const DetectorHealthOptions options_;
  // This window so far.
  int64_t steps_ = 0;
  int64_t complete_steps_ = 0;
  std::vector<int64_t> stage_lasted_steps_;  // by stage: steps where it lasted on some rank
  std::vector<int64_t> step_ns_;             // median rank step duration, per step
  // Per sync stage (index into sync_stages_), per step: arrival skew and duration spread.
  std::vector<size_t> sync_stages_;
  std::vector<std::vector<int64_t>> arrival_skew_ns_;
  std::vector<std::vector<int64_t>> sync_spread_ns_;
  std::vector<int32_t> group_of_rank_;
  size_t group_count_ = 1;  // 1 + the largest of group_of_rank_
  std::string layout_problem_;
  // AddStep's per-group extremes, reused.
  std::vector<int64_t> arrive_min_, arrive_max_, dur_min_, dur_max_;
  std::vector<RankRecordCounters> at_window_start_;
  std::vector<DetectorCondition> current_;

  // The ranks whose counters grew during the window, in the words of the conditions.
  struct CounterGrowth {
    std::vector<std::string> backwards, ahead, dropped;
  };
  // CloseWindow's steps, in the order the conditions are listed.
  CounterGrowth CheckCounters(const std::vector<RankRecordCounters>& ranks);
  void AddClockConditions(const CounterGrowth& growth);
  void AddZeroStageCondition();
  void AddSyncNeverWaitsConditions();
  void AddWindowConditions(int64_t steps_accounted, const CounterGrowth& growth);
  void StartWindow();  // the next window starts empty
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_DETECTOR_HEALTH_H_
