#include "daemon/accounting/verdict_decider.h"

#include "daemon/accounting/excess_table.h"
#include "daemon/accounting/healthy_gate.h"
#include "daemon/accounting/last_arrivers.h"
#include "daemon/accounting/rank_evidence.h"
#include "daemon/accounting/robust_stats.h"
#include "daemon/accounting/suspects.h"
#include "daemon/accounting/top_cell_evidence.h"
#include "daemon/accounting/verdict_classifier.h"
#include "daemon/accounting/verdict_text.h"
#include "daemon/accounting/what_if.h"

namespace stagefrontier {
namespace {

void NoteWindow(const AccountingWindow& window, const ExcessTable& t, Verdict* v) {
  const size_t W = window.size();
  v->first_step = window.at(0).accounting.step;
  v->last_step = window.at(W - 1).accounting.step;
  v->steps = static_cast<int32_t>(W);
  v->missing_ranks = window.at(W - 1).accounting.missing_ranks;
  v->exposed_ns = t.exposed_ns;
  v->partial_steps = t.partial_steps;
  v->flagged_steps = t.flagged_steps;
  v->total_excess_ns = static_cast<int64_t>(t.total);
}

void NoteEvidence(const RankSupport& support, CellRef cell, Verdict* v) {
  v->rank_shift_ns = static_cast<int64_t>(support.at(cell.stage, cell.member).shift_ns);
  v->rank_z = support.at(cell.stage, cell.member).z;
}

void NoteHeld(const RankSupport& support, const StageSchema& schema, int members,
              VerdictDecision* d) {
  for (int k = 0; k < static_cast<int>(schema.size()); ++k) {
    if (!schema.IsWork(static_cast<size_t>(k))) continue;
    for (int m = 0; m < members; ++m) {
      if (support.Held(k, m)) d->held.push_back({k, m});
      if (support.Leans(k, m)) d->leaning.push_back({{k, m}, support.at(k, m).z});
    }
  }
}

void NoteTopCell(const ExcessTable& t, const GroupMembers& members, CellRef cell,
                 VerdictDecision* d) {
  d->stage = cell.stage;
  d->rank = members.ranks[cell.member];
  d->share = t.Share(t.Index(cell.stage, cell.member));
}

}  // namespace

Verdict VerdictDecider::Decide() const {
  VerdictDecision d;
  return Decide(&d);
}

Verdict VerdictDecider::Decide(VerdictDecision* decision) const {
  VerdictDecision& d = *decision;
  d = VerdictDecision{};
  Verdict v;
  v.group = std::string(in_.group);
  if (in_.window.size() > 0) {
    const ExcessTable t = BuildExcessTable(in_.window, in_.members);
    NoteWindow(in_.window, t, &v);
    v.excess_cells = ExcessCells(t, in_.members);
    d.window_steps = v.steps;
    d.total_excess = t.total;
    if (WithinNoise(t, in_.config)) {
      d.kind = VerdictKind::kWithinNoise;
    } else {
      DecideTopCell(t, &v, &d);
    }
  }
  RenderVerdictText(d, in_.schema, &v);
  return v;
}

void VerdictDecider::DecideTopCell(const ExcessTable& t, Verdict* v, VerdictDecision* d) const {
  const AccountingWindow& window = in_.window;
  const WhatIfFn what_if = [&](int k, int m) {
    return WhatIfSaving(window, in_.schema, in_.members, k, m);
  };
  v->suspects = TopSuspects(t, in_.members, what_if);
  const RankEvidenceTable evidence_table = ComputeRankEvidence(window, in_.schema);
  std::vector<int64_t> exposed;
  for (size_t i = 0; i < window.size(); ++i) exposed.push_back(window.at(i).accounting.exposed_ns);
  const double step_ns = static_cast<double>(MedianInPlace(exposed));
  const PriorHeld* prior = PriorWindow(in_.prior_held, v->first_step);
  const RankSupport support(
      evidence_table, in_.schema,
      {in_.config.rank_z_support, in_.config.rank_z_strong,
       in_.config.rank_material_fraction * step_ns},
      in_.config.confirm_recurring && prior != nullptr ? &prior->cells : nullptr);
  NoteHeld(support, in_.schema, t.members, d);
  const TopCells cells = ChooseCells(t, support, prior, v->first_step);
  const TopCellChoice& top = cells.top;
  d->confirmed = top.confirmed;
  NameTop(t, support, what_if, top.cell, v, d);
  switch (top.basis) {
    case TopCellBasis::kGroup:
      return ClassifyGroupExcess(window, in_.config, in_.members, t, &exposed, step_ns, v, d);
    case TopCellBasis::kEvidence:
      return ClassifyByEvidence(window, in_.members, top, v, d);
    case TopCellBasis::kCharged:
      ClassifyCharged(t, support, top.cell, v, d);
      break;
  }
  // The charged cell waited on ranks outside the group (a transfer, a tensor collective), so
  // the window would read HEALTHY; but a strongly evident work cell is a straggler whatever
  // the frontier charged: a persistent fault its baseline has absorbed leaves little excess
  // while the rank's own durations stay far from its peers' (docs/results.md, "Session 24").
  // The charged cell itself counts when it is a tensor stage whose mean shift is strong in this
  // window (not carried, not a few outlier steps): its rank is slower than its role peers step
  // after step there, its tensor group's doing (NameTensorGroup widens the verdict to that
  // group), not a wait on another group; a transfer's duration never is.
  const bool waited =
      d->kind == VerdictKind::kP2pNeighbour || d->kind == VerdictKind::kPipelineWait ||
      d->kind == VerdictKind::kCollectiveExit || d->kind == VerdictKind::kExitSpread;
  if (d->kind == VerdictKind::kLateExit) {
    // The rank that left the stage late leads, with its own measure, not the charged peer.
    NameTop(t, support, what_if, {top.cell.stage, in_.members.MemberOf(d->exit.rank)}, v, d);
    v->rank_shift_ns = static_cast<int64_t>(d->exit.mean_ns);
    v->rank_z = d->exit.z;
  }
  const CellRef strong = cells.by_evidence.cell;
  const bool strong_tensor_top =
      strong == top.cell && !cells.by_evidence.carried &&
      in_.schema.stage(static_cast<size_t>(strong.stage)).kind == StageKind::kTensor &&
      support.at(strong.stage, strong.member).z >= in_.config.rank_z_strong;
  if (v->label == VerdictLabel::kHealthy && waited && strong.valid() &&
      (!(strong == top.cell) || strong_tensor_top)) {
    v->reason = AmbiguityReason::kNone;
    v->settle.clear();
    v->median_margin_ns = 0;
    v->tie_tolerance_ns = 0;
    v->wait_agreement = -1;
    d->confirmed = false;
    NameTop(t, support, what_if, cells.by_evidence.cell, v, d);
    ClassifyByEvidence(window, in_.members, cells.by_evidence, v, d);
  }
}

VerdictDecider::TopCells VerdictDecider::ChooseCells(const ExcessTable& t,
                                                     const RankSupport& support,
                                                     const PriorHeld* prior,
                                                     int64_t first_step) const {
  CellRef strong = StrongestCell(support, in_.schema, t.members);
  CarriedCell carried;
  if (in_.config.carry_clear && !strong.valid()) {
    carried = CarryPriorClear(in_.prior_clears, first_step, support, in_.schema, t.members);
    strong = carried.cell;
  }
  const CellRef confirmed =
      in_.config.confirm_supported
          ? ConfirmedChargedCell(t, support, in_.schema, prior, kConfirmedMinShare)
          : CellRef{};
  TopCells out;
  out.top = ChooseTopCell(t, support, in_.schema, strong, carried, confirmed);
  out.by_evidence.basis = TopCellBasis::kEvidence;
  out.by_evidence.cell = strong;
  out.by_evidence.carried = carried.cell.valid();
  out.by_evidence.carried_from = carried.from;
  return out;
}

void VerdictDecider::NameTop(const ExcessTable& t, const RankSupport& support,
                             const WhatIfFn& what_if, CellRef c, Verdict* v,
                             VerdictDecision* d) const {
  const size_t cell = t.Index(c.stage, c.member);
  if (cell != t.order.front()) {
    PromoteSuspect(&v->suspects, SuspectOf(t, in_.members, cell, what_if));
  }
  NoteEvidence(support, c, v);
  NoteTopCell(t, in_.members, c, d);
}

void VerdictDecider::ClassifyCharged(const ExcessTable& t, const RankSupport& support, CellRef top,
                                     Verdict* v, VerdictDecision* d) const {
  const LastArrivers arrivers(in_.window, in_.schema, in_.members, in_.config);
  const TopCellEvidence e =
      GatherTopCellEvidence(in_.window, in_.schema, in_.members, in_.config, arrivers, top);
  v->median_margin_ns = e.median_margin_ns;
  v->tie_tolerance_ns = e.tie_tolerance_ns;
  v->wait_agreement = e.wait_agreement;
  v->steps_to_profile = e.steps_to_profile;
  const Rivals rivals = FindRivals(t, support, in_.schema, in_.config, in_.members, top);
  const ClassifyContext ctx{in_.schema, in_.config, in_.members, t,   support,
                            arrivers,   e,          rivals,      top, &in_.window};
  ClassifyChargedCell(ctx, v, d);
}

}  // namespace stagefrontier
