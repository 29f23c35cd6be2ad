// The verdict over a window (docs/accounting.md, "Verdicts per window") as a pipeline of named
// steps, each its own file and test:
//
//   1. BuildExcessTable      excess_table.h       stage x member excess, window totals
//   2. WithinNoise           healthy_gate.h       HEALTHY when too little excess
//   3. TopSuspects           suspects.h           the largest cells, with their what-if
//   4. RankSupport           rank_evidence.h      per-cell evidence predicates
//   5. ChooseTopCell         top_cell.h           strong, carried, confirmed, own stage
//   6. GatherTopCellEvidence top_cell_evidence.h  margins, next-wait agreement, rivals
//   7. Classify*             verdict_classifier.h CLEAR / AMBIGUOUS reason / group-wide / HEALTHY
//   8. RenderVerdictText     verdict_text.h       the explanation and settle hint, from 1-7
//
//   GroupMembers members(ranks, wait_groups);
//   VerdictDecider decider({"job", window, schema, config, members, prior_clears, prior_held});
//   Verdict v = decider.Decide();
//
// A new verdict kind (a pipeline's structural imbalance) is one new rule in
// verdict_classifier.h (a VerdictKind, the rule, its place in ChargedCellRules) with its
// words in verdict_text.cc and its test; a kind that needs no top cell is instead one step
// here before the noise gate, returning its own VerdictKind. A hang cannot wait for a window
// to close: the stall verdict is decided apart, between windows (stall_decider.h).
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_DECIDER_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_DECIDER_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "daemon/accounting/accounting_window.h"
#include "daemon/accounting/engine_config.h"
#include "daemon/accounting/excess_table.h"
#include "daemon/accounting/group_members.h"
#include "daemon/accounting/rank_evidence.h"
#include "daemon/accounting/suspects.h"
#include "daemon/accounting/top_cell.h"
#include "daemon/accounting/verdict.h"
#include "daemon/accounting/verdict_decision.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

struct VerdictInputs {
  std::string_view group;  // the Verdict's group name
  const AccountingWindow& window;
  const StageSchema& schema;
  const EngineConfig& config;
  const GroupMembers& members;
  // Cells earlier windows named CLEAR (EngineConfig::carry_clear).
  std::span<const PriorClear> prior_clears;
  // Cells earlier windows held (EngineConfig::confirm_recurring).
  std::span<const PriorHeld> prior_held;
};

class VerdictDecider {
 public:
  explicit VerdictDecider(const VerdictInputs& in) : in_(in) {}

  // The verdict with its words.
  Verdict Decide() const;
  // The same, and what was decided (for tests and other renderers).
  Verdict Decide(VerdictDecision* decision) const;

 private:
  // Step 5's choice, and the strongly evident (or carried) cell a window that would read
  // HEALTHY on a waiting cell gives way to (cell invalid: none).
  struct TopCells {
    TopCellChoice top;
    TopCellChoice by_evidence;
  };

  // Steps 3-7 once the window carries excess beyond noise.
  void DecideTopCell(const ExcessTable& t, Verdict* v, VerdictDecision* d) const;
  TopCells ChooseCells(const ExcessTable& t, const RankSupport& support, const PriorHeld* prior,
                       int64_t first_step) const;
  // Makes `c` the verdict's top cell: first suspect, its evidence, the decision's cell.
  void NameTop(const ExcessTable& t, const RankSupport& support, const WhatIfFn& what_if, CellRef c,
               Verdict* v, VerdictDecision* d) const;
  void ClassifyCharged(const ExcessTable& t, const RankSupport& support, CellRef top, Verdict* v,
                       VerdictDecision* d) const;

  VerdictInputs in_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_DECIDER_H_
