// The engine's per-step result for one rank set: the frontier accounting with baselines,
// excess and where that excess was attributed (stage, ranks) (docs/accounting.md, "Per step:
// exact, integer, clock-free", "Baselines and noise", "Attribution: where the excess is
// charged").
//
//   const StepAccounting& acc = ...;
//   for (const Attribution& a : acc.attributions)
//     printf("%lld ns charged to stage %d, ranks %d...\n", a.excess_ns, a.stage, a.ranks[0]);
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_STEP_ACCOUNTING_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_STEP_ACCOUNTING_H_

#include <cstdint>
#include <vector>

namespace stagefrontier {

// Why a piece of excess was charged where it was.
enum class AttributionKind : uint8_t {
  kFrontierLeader = 0,   // the rank(s) that pushed the frontier forward in this stage
  kCarryOver = 1,        // a late start seen at a wait stage, traced to a tail stage of the
                         // same rank's previous step (e.g. a slow optimizer)
  kLateStart = 2,        // a late start seen at a wait stage, not explained by the tail
  kGroupWait = 3,        // the wait stage itself got slower for everybody (slow collective)
  kMixedUnresolved = 4,  // excess inside a mixed stage, work and waiting not separable
  kProbeResolved = 5,    // excess inside a mixed stage, split by the collective probe
};

// "frontier_leader", "carry_over", ...
const char* AttributionKindName(AttributionKind kind);

struct Attribution {
  int32_t seen_at_stage = 0;   // the stage whose increment carried the excess
  int32_t stage = 0;           // the stage charged in the stage x rank table
  std::vector<int32_t> ranks;  // ranks charged; the excess is split evenly among them
  int64_t excess_ns = 0;
  int64_t margin_ns = 0;  // how far these ranks stood out (leader margin / arrival gap)
  AttributionKind kind = AttributionKind::kFrontierLeader;
};

struct StageAccounting {
  int64_t frontier_ns = 0;          // F[k]
  int64_t increment_ns = 0;         // ΔF[k]
  int32_t leader = -1;              // L[k] (a rank), lowest on exact ties
  std::vector<int32_t> leader_set;  // ranks within the tie tolerance of F[k]
  int64_t margin_ns = 0;            // M[k]
  int64_t mean_duration_ns = 0;     // mean dashboard
  int64_t max_duration_ns = 0;      // max dashboard
  int64_t median_duration_ns = 0;   // peer median duration
  int64_t min_duration_ns = 0;      // shortest duration (wait stages: the last arriver's)
  int32_t min_rank = -1;
  int64_t baseline_ns = -1;        // rolling median of ΔF[k]; -1 while warming up
  int64_t noise_ns = 0;            // temporal noise scale of ΔF[k] (1.4826 MAD, floored)
  int64_t peer_noise_ns = 0;       // cross-rank noise scale of d[k] (pooled, floored)
  int64_t peer_excess_ns = 0;      // ΔF[k] minus the peer counterfactual
  int64_t temporal_excess_ns = 0;  // ΔF[k] minus the baseline (0 while warming up)
  int64_t excess_ns = 0;           // excess attributed at this stage (significant only)
  bool flagged = false;            // excluded from the baselines
};

struct StepAccounting {
  int64_t step = 0;
  int64_t exposed_ns = 0;              // E = F[S] = sum of increments
  // The group's usual exposed step time as of this step (clipped rolling median); -1 while
  // warming up. A window compares its median E with its first step's value.
  int64_t exposed_baseline_ns = -1;
  bool partial = false;                // some expected ranks did not report
  std::vector<int32_t> missing_ranks;  // those ranks
  int32_t first_excess_stage = -1;     // where the group-visible delay first appears
  std::vector<StageAccounting> stages;
  std::vector<Attribution> attributions;
  // Lag behind the frontier at each boundary, rank-major: lag_ns[i * S + k] = F[k] - C_r[k]
  // for the i-th rank of the group; -1 for an absent rank.
  std::vector<int64_t> lag_ns;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_STEP_ACCOUNTING_H_
