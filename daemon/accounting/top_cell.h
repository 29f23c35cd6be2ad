// Verdict step 4: which (stage, member) the verdict is about. The largest excess cell, unless
// the rank evidence says otherwise: a charged cell without support gives way to a strongly
// evident one (or, with carry_clear, to the cell the previous window named CLEAR while it
// stays supported; or, with confirm_supported, to a charged cell the window before confirms)
// or, failing all, to the group; a supported late arrival at a wait moves to the same rank's
// own slower stage; a charged work stage to a stronger one of that rank.
//
//   CellRef strong = StrongestCell(support, schema, members);
//   TopCellChoice top = ChooseTopCell(table, support, schema, strong, CarriedCell{});
//   if (top.basis == TopCellBasis::kGroup) { /* no rank stands out */ }
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_TOP_CELL_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_TOP_CELL_H_

#include <cstdint>
#include <span>
#include <vector>

#include "daemon/accounting/cell_ref.h"
#include "daemon/accounting/excess_table.h"
#include "daemon/accounting/rank_evidence.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

// A cell a closed window named CLEAR (stage -1: it named none), with its last step.
struct PriorClear {
  int64_t last_step = -1;
  int stage = -1;
  int member = -1;
};

// The work cells a closed window held at support level (RankSupport::Held), with its last
// step: what a later window's recurring-fault test asks for (EngineConfig::confirm_recurring).
struct PriorHeld {
  int64_t last_step = -1;
  std::vector<CellRef> cells;
  // The work cells whose mean shift leaned (RankSupport::Leans), with their z.
  std::vector<CellZ> leaning;
};

// The latest PriorHeld that ended before `first_step`; null when no window did: a group's
// first window has nothing to confirm with, and the test alone decides there.
const PriorHeld* PriorWindow(std::span<const PriorHeld> held, int64_t first_step);

struct CarriedCell {
  CellRef cell;
  int64_t from = -1;  // last step of the window that named it
};

enum class TopCellBasis : uint8_t {
  kCharged = 0,   // a supported charged cell (possibly moved to the rank's own stage)
  kEvidence = 1,  // the charged cell is unsupported; rank evidence names another
  kGroup = 2,     // unsupported and nothing else stands out: the group's excess
};

struct TopCellChoice {
  TopCellBasis basis = TopCellBasis::kCharged;
  CellRef cell;  // kGroup: the largest cell, for the evidence words
  bool carried = false;
  int64_t carried_from = -1;
  // kCharged on a charged cell the window before confirms (ConfirmedChargedCell).
  bool confirmed = false;
};

// The work-stage cell with the largest shift among the strongly evident ones.
CellRef StrongestCell(const RankSupport& support, const StageSchema& schema, int members);

// The latest prior CLEAR that ended before `first_step`, if a work stage still supported.
CarriedCell CarryPriorClear(std::span<const PriorClear> named, int64_t first_step,
                            const RankSupport& support, const StageSchema& schema, int members);

// A lesser charged cell must hold this share of the window's excess to be named on
// confirmation (ConfirmedChargedCell): below it, a cell is one of the many that noise charges.
inline constexpr double kConfirmedMinShare = 0.1;

// What a mean shift that leans in two consecutive windows must reach combined, (z + z_before)
// / sqrt 2 (their steps are disjoint): above rank_z_support, because a healthy tensor-parallel
// run's cell leaned at 2.58 then 2.22 (3.39 combined; docs/results.md, "Session 24"): steps
// of one run are not independent draws (a rank descheduled stays slow for a while), so the
// normal reading of a z overstates, and more so over two windows.
inline constexpr double kPersistZ = 3.5;

// A work cell the window before confirms: supported here and held there, or a mean shift
// that leans in both windows (RankSupport::Leans) at kPersistZ combined.
bool ConfirmedByPrior(const RankSupport& support, CellRef cell, const PriorHeld& prior);

// The largest charged cell holding at least `min_share` of the excess that the window before
// confirms (a late arrival at a wait: its rank's own confirmed work stage with the largest
// shift); invalid when none is, or there was no window before.
CellRef ConfirmedChargedCell(const ExcessTable& table, const RankSupport& support,
                             const StageSchema& schema, const PriorHeld* prior, double min_share);

// `strong` is StrongestCell's, or the carried cell when there is none; `confirmed` is
// ConfirmedChargedCell's, taken when the top cell is unsupported and `strong` is invalid.
TopCellChoice ChooseTopCell(const ExcessTable& table, const RankSupport& support,
                            const StageSchema& schema, CellRef strong, const CarriedCell& carried,
                            CellRef confirmed = {});

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_TOP_CELL_H_
