// Verdicts per window (docs/accounting.md, "Verdicts per window"): HEALTHY, CLEAR, or
// AMBIGUOUS with a reason, each carrying the evidence it used and, when ambiguous, what
// evidence would settle it.
//
//   Verdict v = accountant.DecideVerdict();
//   if (v.label == VerdictLabel::kClear) aim_profiler(v.suspects[0].stage, v.suspects[0].rank);
//   else if (v.label == VerdictLabel::kAmbiguous) puts(v.settle.c_str());
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace stagefrontier {

enum class VerdictLabel : uint8_t { kHealthy = 0, kClear = 1, kAmbiguous = 2 };
enum class AmbiguityReason : uint8_t {
  kNone = 0,
  kTie = 1,
  kSplit = 2,
  kMixedSync = 3,
  kConcurrent = 4,
};

// "HEALTHY", "CLEAR", "AMBIGUOUS".
const char* VerdictLabelName(VerdictLabel label);
// "", "TIE", "SPLIT", "MIXED_SYNC", "CONCURRENT".
const char* AmbiguityReasonName(AmbiguityReason reason);

// One (stage, rank) cell of a window's excess: what the stage-by-rank heatmap shows.
struct ExcessCell {
  int32_t stage = 0;
  int32_t rank = 0;
  int64_t excess_ns = 0;      // attributed over the window (a tie's excess split evenly)
  int32_t flagged_steps = 0;  // steps that charged this cell
};

// At most this many cells are kept per verdict (the largest).
inline constexpr size_t kMaxExcessCells = 1024;

struct Suspect {
  int32_t stage = 0;
  int32_t rank = 0;
  int64_t excess_ns = 0;          // attributed excess over the window
  double share = 0;               // of the window's attributed excess
  int32_t flagged_steps = 0;      // steps that charged this cell
  int64_t what_if_saving_ns = 0;  // exposed time saved per step if it behaved like its peers
};

struct Verdict {
  std::string group;  // "job" or the sync group's name
  // A job whose groups are roles (a declared layout): the group whose verdict the job's is
  // (group_verdicts.h); empty otherwise, and when every group is HEALTHY.
  std::string sync_group;
  // A job whose groups are roles: a group slower by construction (group_verdicts.h,
  // StructuralImbalance), said in words; empty when the groups are balanced. Never a rank's.
  std::string structural;
  // Set after the engine (daemon/nodes/node_verdict.h): the node whose every rank the verdict
  // names; the fault is the node's. Empty otherwise.
  std::string node;
  int64_t first_step = 0;
  int64_t last_step = 0;
  int32_t steps = 0;
  VerdictLabel label = VerdictLabel::kHealthy;
  AmbiguityReason reason = AmbiguityReason::kNone;
  std::vector<Suspect> suspects;         // best first, at most 5
  std::vector<int32_t> candidate_ranks;  // the ranks the verdict names
  std::vector<int32_t> candidate_stages;
  // Evidence.
  int64_t exposed_ns = 0;       // window total of E
  int64_t total_excess_ns = 0;  // window total of attributed excess
  int32_t flagged_steps = 0;
  int64_t median_margin_ns = 0;  // top suspect's margin over the steps it was charged
  int64_t tie_tolerance_ns = 0;  // what "within noise" meant for that stage
  double wait_agreement = -1;    // fraction of those steps where the next wait agreed; -1 n/a
  std::vector<int32_t> concurrent_ranks;  // other ranks arriving late at that wait
  int32_t partial_steps = 0;
  std::vector<int32_t> missing_ranks;  // ranks absent from the window's last step
  // The excess is not any rank's: the whole group was slower (a slow collective, network or
  // shared resource). Candidates are then every rank; no rank-targeted action applies.
  bool group_wide = false;
  // Rank evidence behind the top suspect (rank_evidence.h): its shift against its peers per
  // step and in standard errors; 0 when not computed.
  int64_t rank_shift_ns = 0;
  double rank_z = 0;
  // Reserved for detector-health conditions that make this verdict unreliable (clocks going
  // backwards, stages always zero, ...). Not computed yet: always empty.
  std::vector<std::string> unreliable;
  // Words for people.
  std::string explanation;
  std::string settle;                     // what evidence would settle an AMBIGUOUS verdict
  std::vector<int64_t> steps_to_profile;  // a few steps where the excess appeared
  // Every cell that carried excess in the window, largest first (at most kMaxExcessCells),
  // HEALTHY windows included.
  std::vector<ExcessCell> excess_cells;
};

// "HEALTHY", "CLEAR", or "AMBIGUOUS TIE" and the like: the label and, if any, the reason.
std::string LabelText(const Verdict& v);

// What a suspect's excess cost in GPU time: every rank that waited for it (a job's world
// size - 1) idled that long. Negative inputs count as zero.
inline double WastedGpuSeconds(int64_t excess_ns, int32_t waiting_ranks) {
  return excess_ns <= 0 || waiting_ranks <= 0
             ? 0.0
             : static_cast<double>(excess_ns) * waiting_ranks / 1e9;
}

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_H_
