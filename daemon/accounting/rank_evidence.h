// Window-level evidence that one rank, not the group, is slow in one stage: for every
// (stage, member), how much longer the member's stage took than its peers', on average over
// the window, and how many standard errors that is. Per-step frontier attribution charges
// whoever ends a stage last; on real machines (shared cores, Python overheads) that is a
// different rank almost every step, and where a collective hides inside a compute stage it
// is the ranks that *waited*. A persistent or recurring fault, by contrast, shifts one
// member's durations against its peers' in every window; this is the test for that shift.
//
//   RankEvidenceTable t = ComputeRankEvidence(window, schema);
//   const RankEvidence& e = t.at(/*stage=*/2, /*member=*/5);
//   if (e.z >= 5 && e.shift_ns >= 0.02 * step_ns) { /* member 5 is slow in stage 2 */ }
//
// For a wait stage the sign is turned: shift_ns > 0 means the member waited *less* than its
// peers, i.e. it arrived late.
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_RANK_EVIDENCE_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_RANK_EVIDENCE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/accounting/accounting_window.h"
#include "daemon/accounting/cell_ref.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

struct RankEvidence {
  // The member's mean deviation from the per-step peer median in this stage (in a step with
  // two members present, from the other one: the whole gap), minus the median member's mean
  // deviation (so a group-wide slowdown, or a skewed stage, cancels).
  double shift_ns = 0;
  // shift_ns over its standard error: the pooled spread of per-step deviations around each
  // member's own mean, over sqrt(steps). 0 when the stage has no spread or too few steps.
  double z = 0;
  int32_t steps = 0;  // window steps where the member was present
  // Recurring faults (1 step in 8) barely move a mean over noisy steps but stand far out in
  // the steps they hit: the steps where the member's deviation is beyond kOutlierScales
  // robust noise scales of the stage's pooled deviations, and a one-sided binomial z of that
  // count against the other members' rate.
  int32_t outlier_steps = 0;
  double outlier_z = 0;
  // The mean deviation beyond the pooled median in those outlier steps: what one recurrence
  // costs, where shift_ns spreads it over every step.
  double outlier_excess_ns = 0;
};

inline constexpr double kOutlierScales = 5.0;
// Fewer outlier steps than this give no outlier_z: a binomial z over two or three rare events
// is not evidence.
inline constexpr int32_t kMinOutlierSteps = 5;
// A recurrence is material when one costs this many times the material floor (the floor a mean
// shift must reach): on shared cores a busy rank loses a scheduler slice (~1 ms, 3% of a 30 ms
// step) in a third of its steps and read CLEAR so on real healthy pipelines (docs/results.md,
// "Session 31"). A thin margin: the smallest recorded intermittent faults cost 2.2-3.3 times
// the floor where they hit; SPEC's smallest fault is 5% of the step, 2.5 times.
inline constexpr double kRecurrenceMaterial = 2.0;
// A window's mean-shift z that a persisting shift must reach in each of two windows.
inline constexpr double kLeanZ = 2.0;

class RankEvidenceTable {
 public:
  RankEvidenceTable(int stages, int members)
      : stages_(stages), members_(members), cells_(static_cast<size_t>(stages) * members) {}
  const RankEvidence& at(int stage, int member) const {
    return cells_[static_cast<size_t>(stage) * members_ + member];
  }
  RankEvidence& at(int stage, int member) {
    return cells_[static_cast<size_t>(stage) * members_ + member];
  }
  int stages() const { return stages_; }
  int members() const { return members_; }

 private:
  int stages_;
  int members_;
  std::vector<RankEvidence> cells_;
};

// How ComputeRankEvidence finds each stage's pooled median and MAD, and the outliers beyond
// them, without gathering millions of values a stage (issue 33): a sample brackets the wanted
// value, one walk of the window counts what lies below the bracket and keeps what lies in it.
// Every setting gives the same table, bit for bit; where a bracket misses, the plain way.
// For tests and benchmarks.
struct EvidenceSelection {
  size_t sample = 16'384;      // positions drawn from the window to bracket with
  size_t margin = 256;         // sample ranks either side of the wanted one (~4 standard errors)
  size_t min_values = 65'536;  // a stage with fewer pooled values keeps them all
  // Room for the deviations that may be outliers: a 32nd of them and this many more.
  size_t min_candidate_room = 65'536;
};

// Computes the table over the window's steps. Steps with fewer than two present members are
// skipped (no peers to compare with). Never fails; an empty window gives zeros.
RankEvidenceTable ComputeRankEvidence(const AccountingWindow& window, const StageSchema& schema,
                                      const EvidenceSelection& selection = {});

// The evidence predicates on a table: when a (stage, member) cell counts as evident,
// supported, strong, or still supported after an earlier window named it.
//
//   RankSupport support(table, schema, {.z_support = 3, .z_strong = 5, .material_ns = 2.4e6});
//   if (support.Strong(2, 5)) { /* CLEAR on (stage 2, member 5) without the frontier */ }
struct SupportThresholds {
  double z_support = 0;    // EngineConfig::rank_z_support
  double z_strong = 0;     // EngineConfig::rank_z_strong
  double material_ns = 0;  // rank_material_fraction of the window's median exposed step
};

class RankSupport {
 public:
  // `confirmed`: the cells the window before held (Held), which the recurring-fault test then
  // requires (EngineConfig::confirm_recurring); null: no such requirement.
  RankSupport(const RankEvidenceTable& table, const StageSchema& schema,
              SupportThresholds thresholds, const std::vector<CellRef>* confirmed = nullptr)
      : table_(table), schema_(schema), th_(thresholds), confirmed_(confirmed) {}

  const RankEvidence& at(int stage, int member) const { return table_.at(stage, member); }
  // z_min standard errors and a material shift, isolated spikes taken out; or a recurring
  // fault: mean-shift z at support level, outlier z at recurring_z_min, material recurrences.
  bool Evident(int stage, int member, double z_min, double recurring_z_min) const;
  // Enough to name a cell the frontier did not charge.
  bool Strong(int stage, int member) const {
    return Evident(stage, member, th_.z_strong, th_.z_strong);
  }
  // Enough to keep a charged cell rank-targeted (mixed stages always are: the probe or
  // MIXED_SYNC decides there; p2p stages never are: a transfer is its neighbour's time).
  bool Supported(int stage, int member) const;
  bool SupportedAnywhere(int member) const;
  // Enough to keep a cell an earlier window named CLEAR: supporting evidence, or strong and
  // material recurrences whatever the mean-shift z (a spike elsewhere can hold that down).
  bool StillSupported(int stage, int member) const;
  // What this window passes on for the next one to confirm a recurring fault with: evident at
  // support level whatever the window before held, or material recurrences at support level
  // whatever the mean-shift z (a fault that started late in the window barely moves its mean).
  bool Held(int stage, int member) const;
  // A material mean shift (isolated spikes taken out) at kLeanZ standard errors: short of
  // support alone, what a shift that persists over two windows shows in each
  // (ConfirmedChargedCell).
  bool Leans(int stage, int member) const;

 private:
  bool EvidentIn(int stage, int member, double z_min, double recurring_z_min, bool confirm) const;
  // The mean shift without a few isolated spikes (fewer than kMinOutlierSteps).
  double ShiftWithoutSpikes(const RankEvidence& e) const;
  // Material recurrences that stand out at `outlier_z_min`, whatever the mean-shift z.
  bool Recurs(const RankEvidence& e, double outlier_z_min) const;
  bool Confirmed(int stage, int member) const;

  const RankEvidenceTable& table_;
  const StageSchema& schema_;
  SupportThresholds th_;
  const std::vector<CellRef>* confirmed_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_RANK_EVIDENCE_H_
