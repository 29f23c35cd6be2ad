// What a verdict decided, beside the Verdict's own fields: which rule fired and the numbers
// its words need. The classifier fills it; the renderer (verdict_text.h) turns it into the
// explanation and the settle hint, so decisions never depend on prose.
//
//   VerdictDecision d;
//   d.kind = VerdictKind::kWithinNoise;
//   RenderVerdictText(d, schema, &verdict);
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_DECISION_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_DECISION_H_

#include <cstdint>
#include <vector>

#include "daemon/accounting/cell_ref.h"

namespace stagefrontier {

// One per rule; a new verdict kind adds one here, its rule and its words.
enum class VerdictKind : uint8_t {
  kNoSteps = 0,     // HEALTHY: nothing accounted yet
  kWithinNoise,     // HEALTHY: the noise gate
  kGroupSpread,     // HEALTHY: excess spread over the group, no group shift
  kGroupWide,       // AMBIGUOUS TIE, group_wide: the whole group is slower
  kStrongEvidence,  // CLEAR: one rank's own durations, whoever the frontier charged
  kProbeSettled,    // CLEAR: the probe's last arriver settles a tie or concurrent lead
  kClear,           // CLEAR: the top cell stands out
  kMixedSync,       // AMBIGUOUS MIXED_SYNC
  kCoLeaderTie,     // AMBIGUOUS TIE: co-leaders in the top stage
  kSplit,           // AMBIGUOUS SPLIT
  kMarginTie,       // AMBIGUOUS TIE: the top cell leads by less than noise
  kConcurrent,      // AMBIGUOUS CONCURRENT
  kP2pNeighbour,    // HEALTHY: a pipeline transfer charged, yet never late at the next wait
  kPipelineWait,    // HEALTHY: late at a sync stage of a pipeline within noise, no own stage
  kCollectiveExit,  // HEALTHY: late at a later sync stage for leaving the wait before late
  kExitSpread,      // HEALTHY: a peer's charged late start is another rank's small late exit
  kLateExit,        // CLEAR: that late exit costs the job: the rank that left late is named
};

// A late exit from a collective (kCollectiveExit, kExitSpread) costing less than this share
// of the window's exposed time is the collective's spread, not a straggler.
inline constexpr double kExitSpreadMaterial = 0.05;

// The group's exposed step against its baseline (kGroupWide, kGroupSpread).
struct GroupShift {
  int stage = -1;  // the stage with the most excess
  double step_ns = 0;
  double shift_ns = 0;   // median exposed step minus the baseline as the window began
  double spread_ns = 0;  // the window's step-to-step jitter (robust standard deviation)
  bool warm = false;     // the baseline had warmed up
  bool beyond_jitter = false;
};

struct ProbeSettlement {
  std::vector<int32_t> tied_ranks;  // the ranks the probe chose among
  int32_t rank = -1;
  int at_stage = -1;
  int steps = 0;
  int evidence = 0;
};

struct SplitPart {
  int stage = 0;
  int32_t rank = 0;
  double share = 0;
};

struct VerdictDecision {
  VerdictKind kind = VerdictKind::kNoSteps;
  int32_t window_steps = 0;
  double total_excess = 0;  // unrounded, for the HEALTHY percentage
  // The top cell.
  int stage = -1;
  int32_t rank = -1;
  double share = 0;
  double stage_excess = 0;        // the top stage's excess over the window (kMixedSync)
  bool whole_group_tied = false;  // kCoLeaderTie: every member is a co-leader
  int previous_wait = -1;         // kCollectiveExit: the wait the rank left late
  // kExitSpread, kLateExit: who left the top stage late, measured against the next wait.
  struct {
    int32_t rank = -1;
    int32_t charged_rank = -1;  // the rank the frontier charged (the top cell's)
    int next_wait = -1;
    double mean_ns = 0;
    double z = 0;
  } exit;
  // kStrongEvidence on a cell an earlier window named.
  bool carried = false;
  int64_t carried_from = -1;
  // The top cell is a charged one the window before confirms (EngineConfig::confirm_supported).
  bool confirmed = false;
  GroupShift group;
  ProbeSettlement probe;
  std::vector<SplitPart> split;  // the top cell first
  // The work cells held at support level (RankSupport::Held): for the next window.
  std::vector<CellRef> held;
  // The work cells whose mean shift leaned (RankSupport::Leans), with their z: for the next.
  std::vector<CellZ> leaning;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_DECISION_H_
