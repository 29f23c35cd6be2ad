#include "daemon/accounting/verdict_classifier.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "daemon/accounting/robust_stats.h"
#include "daemon/accounting/suspects.h"

namespace stagefrontier {
namespace {

// Candidates for a verdict about the top cell only.
void NameTopCell(const ClassifyContext& c, Verdict* v) {
  v->candidate_ranks = {c.members.ranks[c.top.member]};
  v->candidate_stages = {c.top.stage};
}

// (count, rank) pairs, most counted first.
std::vector<std::pair<int32_t, int32_t>> ByCount(const std::map<int32_t, int32_t>& counts) {
  std::vector<std::pair<int32_t, int32_t>> out(counts.begin(), counts.end());
  std::sort(out.begin(), out.end(), [](auto a, auto b) { return a.second > b.second; });
  return out;
}

// A charged top cell that is nobody's fault: HEALTHY, no candidates.
bool ClaimHealthy(VerdictKind kind, Verdict* v, VerdictDecision* d) {
  v->label = VerdictLabel::kHealthy;
  v->reason = AmbiguityReason::kNone;
  v->candidate_ranks.clear();
  v->candidate_stages.clear();
  d->kind = kind;
  return true;
}

void AddUnique(std::vector<int32_t>* values, int32_t x) {
  if (std::find(values->begin(), values->end(), x) == values->end()) values->push_back(x);
}

}  // namespace

bool MixedSyncRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d) {
  const int k = c.top.stage;
  if (c.schema.stage(k).kind != StageKind::kMixed ||
      c.table.stage_unresolved[k] < 0.5 * c.table.stage_total[k]) {
    return false;
  }
  v->reason = AmbiguityReason::kMixedSync;
  v->candidate_ranks = c.rivals.co_leaders;
  v->candidate_stages = {k};
  d->kind = VerdictKind::kMixedSync;
  d->stage_excess = c.table.stage_total[k];
  return true;
}

bool P2pNeighbourRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d) {
  if (!c.schema.WaitsOutsideGroup(c.top.stage) || v->wait_agreement < 0 ||
      v->wait_agreement >= 0.5) {
    return false;
  }
  return ClaimHealthy(VerdictKind::kP2pNeighbour, v, d);
}

bool PipelineWaitRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d) {
  if (c.schema.stage(c.top.stage).kind != StageKind::kSync ||
      v->median_margin_ns >= v->tie_tolerance_ns) {
    return false;
  }
  bool pipeline = false;
  for (size_t k = 0; k < c.schema.size(); ++k) pipeline = pipeline || c.schema.WaitsOutsideGroup(k);
  if (!pipeline) return false;
  return ClaimHealthy(VerdictKind::kPipelineWait, v, d);
}

bool CollectiveExitRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d) {
  const int k = c.top.stage;
  const double cost = c.table.cell[c.table.Index(k, c.top.member)];
  if (c.schema.stage(k).kind != StageKind::kSync || v->wait_agreement < 0.5 ||
      cost >= kExitSpreadMaterial * static_cast<double>(v->exposed_ns)) {
    return false;
  }
  int previous_wait = -1;
  for (int j = k - 1; j >= 0 && previous_wait < 0; --j) {
    if (c.schema.IsWait(j)) previous_wait = j;
  }
  if (previous_wait < 0) return false;  // the first wait: a late start between steps
  for (int j = previous_wait + 1; j < k; ++j) {
    const StageKind kind = c.schema.stage(j).kind;
    if (kind != StageKind::kIo && kind != StageKind::kCompute) return false;
    if (c.support.Supported(j, c.top.member)) return false;
  }
  d->previous_wait = previous_wait;
  return ClaimHealthy(VerdictKind::kCollectiveExit, v, d);
}

bool LateExitRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d) {
  const int j = c.top.stage;
  if (c.window == nullptr || c.schema.stage(j).kind != StageKind::kSync || d->window_steps <= 0) {
    return false;
  }
  const ExitLag lag = LargestExitLag(*c.window, c.schema, j);
  const double per_step = c.table.cell[c.table.Index(j, c.top.member)] / d->window_steps;
  // The exiting rank must be another than the charged one: the charge is then its echo.
  if (lag.member < 0 || lag.member == c.top.member || lag.z < c.config.rank_z_strong ||
      lag.mean_ns < 0.5 * per_step) {
    return false;
  }
  d->exit.rank = c.members.ranks[lag.member];
  d->exit.charged_rank = c.members.ranks[c.top.member];
  d->exit.next_wait = lag.next_wait;
  d->exit.mean_ns = lag.mean_ns;
  d->exit.z = lag.z;
  if (lag.mean_ns * lag.steps < kExitSpreadMaterial * static_cast<double>(v->exposed_ns)) {
    return ClaimHealthy(VerdictKind::kExitSpread, v, d);
  }
  v->label = VerdictLabel::kClear;
  v->reason = AmbiguityReason::kNone;
  v->candidate_ranks = {d->exit.rank};
  v->candidate_stages = {j};
  d->kind = VerdictKind::kLateExit;
  return true;
}

bool CoLeaderTieRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d) {
  const std::vector<int32_t>& co = c.rivals.co_leaders;
  if (co.size() < 2) return false;
  if (SettleByProbe(c, co, v, d)) return true;
  v->reason = AmbiguityReason::kTie;
  v->candidate_ranks = co;
  v->candidate_stages = {c.top.stage};
  d->kind = VerdictKind::kCoLeaderTie;
  d->whole_group_tied = co.size() == static_cast<size_t>(c.members.size());
  return true;
}

bool SplitRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d) {
  if (c.rivals.large.empty()) return false;
  v->reason = AmbiguityReason::kSplit;
  NameTopCell(c, v);
  d->kind = VerdictKind::kSplit;
  d->split = {{c.top.stage, c.members.ranks[c.top.member], d->share}};
  for (size_t cell : c.rivals.large) {
    const int k = c.table.StageOf(cell);
    const int32_t r = c.members.ranks[c.table.MemberOf(cell)];
    d->split.push_back({k, r, c.table.Share(cell)});
    AddUnique(&v->candidate_ranks, r);
    AddUnique(&v->candidate_stages, k);
  }
  return true;
}

bool MarginTieRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d) {
  if (v->median_margin_ns >= v->tie_tolerance_ns) return false;
  std::vector<int32_t> candidates = {c.members.ranks[c.top.member]};
  const auto tied = ByCount(c.evidence.tied_with);
  for (size_t i = 0; i < tied.size() && candidates.size() < 12; ++i) {
    if (c.support.Supported(c.top.stage, c.members.MemberOf(tied[i].first)))
      candidates.push_back(tied[i].first);
  }
  if (candidates.size() < 2) return ClearRule(c, v, d);
  if (SettleByProbe(c, candidates, v, d)) return true;
  v->reason = AmbiguityReason::kTie;
  v->candidate_ranks = candidates;
  v->candidate_stages = {c.top.stage};
  d->kind = VerdictKind::kMarginTie;
  return true;
}

bool ConcurrentRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d) {
  if (v->wait_agreement < 0 || v->wait_agreement >= 0.5) return false;
  std::vector<int32_t> candidates = {c.members.ranks[c.top.member]};
  for (const auto& [rank, count] : c.evidence.also_late) {
    if (c.support.SupportedAnywhere(c.members.MemberOf(rank))) candidates.push_back(rank);
  }
  if (candidates.size() < 2) return ClearRule(c, v, d);
  if (SettleByProbe(c, candidates, v, d)) return true;
  v->reason = AmbiguityReason::kConcurrent;
  NameTopCell(c, v);
  const auto others = ByCount(c.evidence.also_late);
  for (size_t i = 0; i < others.size() && v->concurrent_ranks.size() < 8; ++i) {
    if (c.support.SupportedAnywhere(c.members.MemberOf(others[i].first)))
      v->concurrent_ranks.push_back(others[i].first);
  }
  d->kind = VerdictKind::kConcurrent;
  return true;
}

bool ClearRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d) {
  v->label = VerdictLabel::kClear;
  v->reason = AmbiguityReason::kNone;
  NameTopCell(c, v);
  d->kind = VerdictKind::kClear;
  return true;
}

const std::vector<VerdictRule>& ChargedCellRules() {
  static const std::vector<VerdictRule> rules = {
      MixedSyncRule,    P2pNeighbourRule,   LateExitRule,  CoLeaderTieRule, SplitRule,
      PipelineWaitRule, CollectiveExitRule, MarginTieRule, ConcurrentRule,  ClearRule,
  };
  return rules;
}

void ClassifyChargedCell(const ClassifyContext& c, Verdict* v, VerdictDecision* d) {
  v->label = VerdictLabel::kAmbiguous;
  for (VerdictRule rule : ChargedCellRules()) {
    if (rule(c, v, d)) return;
  }
}

bool SettleByProbe(const ClassifyContext& c, const std::vector<int32_t>& ranks, Verdict* v,
                   VerdictDecision* d) {
  std::vector<int> candidates;
  for (int32_t r : ranks) candidates.push_back(c.members.MemberOf(r));
  const ProbeArrival p = c.arrivers.ProbeLastArriver(c.top.stage, candidates);
  if (p.member < 0) return false;
  const int32_t rank = c.members.ranks[p.member];
  // The probe's rank leads the suspects (the marks may have ranked a co-leader first).
  LeadWith(&v->suspects, c.top.stage, rank);
  v->label = VerdictLabel::kClear;
  v->reason = AmbiguityReason::kNone;
  v->candidate_ranks = {rank};
  v->candidate_stages = {c.top.stage};
  v->settle.clear();
  d->kind = VerdictKind::kProbeSettled;
  d->probe = {ranks, rank, p.at_stage, p.steps, p.evidence};
  return true;
}

void ClassifyGroupExcess(const AccountingWindow& window, const EngineConfig& config,
                         const GroupMembers& members, const ExcessTable& table,
                         std::vector<int64_t>* exposed, double step_ns, Verdict* v,
                         VerdictDecision* d) {
  GroupShift& g = d->group;
  g.stage = static_cast<int>(std::max_element(table.stage_total.begin(), table.stage_total.end()) -
                             table.stage_total.begin());
  // Against the baseline as it stood when the window began: a run that speeds up after its
  // first steps (warm-up) is not a group that slowed down.
  const int64_t baseline = window.at(0).accounting.exposed_baseline_ns;
  g.warm = baseline > 0;  // -1 while the group's baseline warms up
  g.step_ns = step_ns;
  g.shift_ns = step_ns - static_cast<double>(baseline);
  for (size_t i = 0; i < window.size() && v->steps_to_profile.size() < 5; ++i) {
    const StepAccounting& acc = window.at(i).accounting;
    if (acc.stages[g.stage].flagged) v->steps_to_profile.push_back(acc.step);
  }
  g.spread_ns =
      kMadToSigma * static_cast<double>(MadInPlace(*exposed, static_cast<int64_t>(step_ns)));
  g.beyond_jitter = g.shift_ns >= config.group_spread_z * g.spread_ns;
  if (g.warm && g.shift_ns >= config.group_material_fraction * static_cast<double>(baseline) &&
      g.beyond_jitter) {
    v->label = VerdictLabel::kAmbiguous;
    v->reason = AmbiguityReason::kTie;
    v->group_wide = true;
    v->candidate_ranks = members.ranks;
    v->candidate_stages = {g.stage};
    d->kind = VerdictKind::kGroupWide;
    return;
  }
  v->label = VerdictLabel::kHealthy;
  d->kind = VerdictKind::kGroupSpread;
}

void ClassifyByEvidence(const AccountingWindow& window, const GroupMembers& members,
                        const TopCellChoice& top, Verdict* v, VerdictDecision* d) {
  const int k = top.cell.stage;
  const int m = top.cell.member;
  // Steps worth profiling: where its duration exceeded the step's median most.
  std::vector<std::pair<int64_t, int64_t>> by_excess;  // (excess, step)
  for (size_t i = 0; i < window.size(); ++i) {
    if (!window.present(i, m)) continue;
    const StepAccounting& acc = window.at(i).accounting;
    by_excess.emplace_back(window.duration(i, m, k) - acc.stages[k].median_duration_ns, acc.step);
  }
  const size_t keep = std::min<size_t>(5, by_excess.size());
  std::partial_sort(by_excess.begin(), by_excess.begin() + static_cast<std::ptrdiff_t>(keep),
                    by_excess.end(), std::greater<>());
  v->steps_to_profile.clear();
  for (size_t i = 0; i < keep; ++i) v->steps_to_profile.push_back(by_excess[i].second);
  std::sort(v->steps_to_profile.begin(), v->steps_to_profile.end());
  // The frontier charged ranks that waited; the evidence names the one they waited for.
  v->label = VerdictLabel::kClear;
  v->candidate_ranks = {members.ranks[m]};
  v->candidate_stages = {k};
  d->kind = VerdictKind::kStrongEvidence;
  d->carried = top.carried;
  d->carried_from = top.carried_from;
}

}  // namespace stagefrontier
