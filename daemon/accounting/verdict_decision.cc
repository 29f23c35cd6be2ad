// GroupAccountant::DecideVerdict: from the window's attributed excess to a labelled verdict.
#include <algorithm>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/accounting/group_accountant.h"
#include "daemon/accounting/rank_evidence.h"
#include "daemon/accounting/robust_stats.h"

namespace stagefrontier {

namespace {

std::string Ms(int64_t ns) { return absl::StrFormat("%.2f ms", static_cast<double>(ns) / 1e6); }

std::string RankList(const std::vector<int32_t>& ranks, size_t limit = 12) {
  std::vector<int32_t> shown(ranks.begin(), ranks.begin() + std::min(limit, ranks.size()));
  std::string out = absl::StrJoin(shown, ", ");
  if (ranks.size() > limit) absl::StrAppend(&out, " and ", ranks.size() - limit, " more");
  return out;
}

}  // namespace

Verdict GroupAccountant::CloseWindow() {
  Verdict v = DecideVerdict();
  named_[0] = named_[1];
  named_[1] = NamedCell{v.last_step, -1, -1};
  if (v.label == VerdictLabel::kClear && !v.suspects.empty()) {
    named_[1].stage = v.suspects[0].stage;
    named_[1].member = MemberOf(v.suspects[0].rank);
  }
  return v;
}

Verdict GroupAccountant::DecideVerdict() const {
  Verdict v;
  v.group = name_;
  const size_t W = window_.size();
  if (W == 0) {
    v.explanation = "no steps accounted yet";
    return v;
  }
  const int n = window_.members();
  const int S = stages_;
  v.first_step = window_.at(0).accounting.step;
  v.last_step = window_.at(W - 1).accounting.step;
  v.steps = static_cast<int32_t>(W);
  v.missing_ranks = window_.at(W - 1).accounting.missing_ranks;

  // The stage x rank table of attributed excess over the window.
  std::vector<double> cell(static_cast<size_t>(S) * n, 0.0);
  std::vector<int32_t> cell_steps(static_cast<size_t>(S) * n, 0);
  std::vector<int64_t> cell_last_step(static_cast<size_t>(S) * n, -1);
  std::vector<double> stage_total(S, 0.0);
  std::vector<double> stage_unresolved(S, 0.0);
  double total = 0;
  for (size_t i = 0; i < W; ++i) {
    const StepAccounting& acc = window_.at(i).accounting;
    v.exposed_ns += acc.exposed_ns;
    if (acc.partial) ++v.partial_steps;
    if (!acc.attributions.empty()) ++v.flagged_steps;
    for (const Attribution& a : acc.attributions) {
      const double each = static_cast<double>(a.excess_ns) / static_cast<double>(a.ranks.size());
      for (int32_t rank : a.ranks) {
        const size_t c = static_cast<size_t>(a.stage) * n + MemberOf(rank);
        cell[c] += each;
        if (cell_last_step[c] != acc.step) {
          cell_last_step[c] = acc.step;
          ++cell_steps[c];
        }
      }
      stage_total[a.stage] += static_cast<double>(a.excess_ns);
      if (a.kind == AttributionKind::kMixedUnresolved) {
        stage_unresolved[a.stage] += static_cast<double>(a.excess_ns);
      }
      total += static_cast<double>(a.excess_ns);
    }
  }
  v.total_excess_ns = static_cast<int64_t>(total);
  // Every cell with excess, largest first: the suspects below are the first of them.
  std::vector<size_t> order;
  for (size_t c = 0; c < cell.size(); ++c) {
    if (cell[c] > 0) order.push_back(c);
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return cell[a] != cell[b] ? cell[a] > cell[b] : a < b; });
  for (size_t i = 0; i < order.size() && i < kMaxExcessCells; ++i) {
    const size_t c = order[i];
    v.excess_cells.push_back(
        {static_cast<int32_t>(c / n), ranks_[c % n], static_cast<int64_t>(cell[c]), cell_steps[c]});
  }

  if (v.flagged_steps < config_.min_flagged_steps ||
      total < config_.healthy_fraction * static_cast<double>(v.exposed_ns)) {
    v.label = VerdictLabel::kHealthy;
    v.explanation =
        absl::StrCat("excess within noise: ", v.flagged_steps, " of ", W, " steps carried excess, ",
                     Ms(v.total_excess_ns), " in total (",
                     absl::StrFormat("%.3f%%", 100.0 * total / std::max<double>(1, v.exposed_ns)),
                     " of exposed time)");
    if (!v.missing_ranks.empty()) {
      absl::StrAppend(&v.explanation, "; ranks not reporting: ", RankList(v.missing_ranks));
    }
    return v;
  }

  // Suspects: the largest cells.
  auto suspect_of = [&](size_t c) {
    Suspect s;
    s.stage = static_cast<int32_t>(c / n);
    s.rank = ranks_[c % n];
    s.excess_ns = static_cast<int64_t>(cell[c]);
    s.share = cell[c] / total;
    s.flagged_steps = cell_steps[c];
    s.what_if_saving_ns = WhatIfSaving(s.stage, static_cast<int>(c % n));
    return s;
  };
  for (size_t i = 0; i < order.size() && i < 5; ++i) v.suspects.push_back(suspect_of(order[i]));
  size_t top = order.front();

  // Rank evidence (rank_evidence.h): is the top cell one rank's, or the group's noise?
  const RankEvidenceTable rank_evidence = ComputeRankEvidence(window_, schema_);
  std::vector<int64_t> exposed;
  for (size_t i = 0; i < W; ++i) exposed.push_back(window_.at(i).accounting.exposed_ns);
  const double step_ns = static_cast<double>(MedianInPlace(exposed));
  const double material = config_.rank_material_fraction * step_ns;
  // (k, m)'s own evidence reaches z_min standard errors and a material shift: material on
  // average, or, for a recurring fault (1 step in 7 of 9% of a step moves the mean by 1.3%),
  // in the steps it hits, when those steps stand out on their own (outlier_z).
  auto evident = [&](int k, int m, double z_min, double recurring_z_min) {
    const RankEvidence& e = rank_evidence.at(k, m);
    // A few isolated spikes (fewer than kMinOutlierSteps) are not a slow rank: its shift must
    // stay material without them.
    const double spikes = e.outlier_steps < kMinOutlierSteps && e.steps > 0
                              ? e.outlier_steps * e.outlier_excess_ns / e.steps
                              : 0.0;
    if (std::max(e.z, e.outlier_z) >= z_min && e.shift_ns - spikes >= material) return true;
    // A recurring fault: its rare steps dilute the mean test, so its strength is the outlier
    // test's, with the mean shift at least at the support level.
    return e.z >= config_.rank_z_support && e.shift_ns > 0 && e.outlier_z >= recurring_z_min &&
           e.outlier_excess_ns >= material;
  };
  // A cell named CLEAR in the window before: supporting evidence keeps it named, and a
  // recurring fault keeps it on its recurrences alone (strong and material), since a few
  // unrelated spikes in the window can hold its mean-shift z under the support level.
  auto carried_evident = [&](int k, int m) {
    const RankEvidence& e = rank_evidence.at(k, m);
    return evident(k, m, config_.rank_z_support, config_.rank_z_support) ||
           (e.shift_ns > 0 && e.outlier_z >= config_.rank_z_strong &&
            e.outlier_excess_ns >= material);
  };
  auto supported = [&](int k, int m) {
    // A mixed stage ends together for everyone: durations cannot show who was slow inside
    // it; the probe or the MIXED_SYNC verdict decides there.
    return schema_.stage(k).kind == StageKind::kMixed ||
           evident(k, m, config_.rank_z_support, config_.rank_z_strong);
  };
  auto supported_anywhere = [&](int m) {
    for (int k = 0; k < S; ++k) {
      if (supported(k, m)) return true;
    }
    return false;
  };
  // The strongest single cause: a stage where one rank's own work takes longer than its
  // peers', far beyond noise, whichever ranks the frontier charged.
  int strong_k = -1, strong_m = -1;
  for (int k = 0; k < S; ++k) {
    if (schema_.IsWait(static_cast<size_t>(k))) continue;
    for (int m = 0; m < n; ++m) {
      if (evident(k, m, config_.rank_z_strong, config_.rank_z_strong) &&
          (strong_k < 0 ||
           rank_evidence.at(k, m).shift_ns > rank_evidence.at(strong_k, strong_m).shift_ns)) {
        strong_k = k;
        strong_m = m;
      }
    }
  }
  // The cell the window before this one named CLEAR needs only supporting evidence to stay
  // named (EngineConfig::carry_clear).
  bool carried = false;
  int64_t carried_from = -1;
  if (config_.carry_clear && strong_k < 0) {
    const NamedCell* prior = nullptr;
    for (const NamedCell& c : named_) {
      if (c.stage >= 0 && c.last_step < v.first_step &&
          (prior == nullptr || c.last_step > prior->last_step)) {
        prior = &c;
      }
    }
    if (prior != nullptr && prior->member >= 0 && prior->member < n &&
        !schema_.IsWait(static_cast<size_t>(prior->stage)) &&
        carried_evident(prior->stage, prior->member)) {
      strong_k = prior->stage;
      strong_m = prior->member;
      carried = true;
      carried_from = prior->last_step;
    }
  }
  // Steps worth profiling for (k, m): where its duration exceeded the step's median most.
  auto profile_steps = [&](int k, int m) {
    std::vector<std::pair<int64_t, int64_t>> by_excess;  // (excess, step)
    for (size_t i = 0; i < W; ++i) {
      if (!window_.present(i, m)) continue;
      const StepAccounting& acc = window_.at(i).accounting;
      by_excess.emplace_back(window_.duration(i, m, k) - acc.stages[k].median_duration_ns,
                             acc.step);
    }
    const size_t keep = std::min<size_t>(5, by_excess.size());
    std::partial_sort(by_excess.begin(), by_excess.begin() + static_cast<std::ptrdiff_t>(keep),
                      by_excess.end(), std::greater<>());
    v.steps_to_profile.clear();
    for (size_t i = 0; i < keep; ++i) v.steps_to_profile.push_back(by_excess[i].second);
    std::sort(v.steps_to_profile.begin(), v.steps_to_profile.end());
  };
  auto note_evidence = [&](int k, int m) {
    v.rank_shift_ns = static_cast<int64_t>(rank_evidence.at(k, m).shift_ns);
    v.rank_z = rank_evidence.at(k, m).z;
  };
  // Makes (k, m) the top cell and the first suspect.
  auto promote = [&](int k, int m) {
    top = static_cast<size_t>(k) * n + m;
    auto it = std::find_if(v.suspects.begin(), v.suspects.end(),
                           [&](const Suspect& x) { return x.stage == k && x.rank == ranks_[m]; });
    if (it != v.suspects.end()) {
      std::rotate(v.suspects.begin(), it, it + 1);
      return;
    }
    v.suspects.insert(v.suspects.begin(), suspect_of(top));
    if (v.suspects.size() > 5) v.suspects.pop_back();
  };
  if (!supported(static_cast<int>(top / n), static_cast<int>(top % n))) {
    if (strong_k < 0) {
      // No rank stands out: the excess is the group's (shared cores, a slower collective).
      const int k = static_cast<int>(std::max_element(stage_total.begin(), stage_total.end()) -
                                     stage_total.begin());
      // Against the baseline as it stood when the window began: a run that speeds up after
      // its first steps (warm-up) is not a group that slowed down.
      const int64_t baseline = window_.at(0).accounting.exposed_baseline_ns;
      const bool warm = baseline > 0;  // -1 while the group's baseline warms up
      const double shift = step_ns - static_cast<double>(baseline);
      note_evidence(static_cast<int>(top / n), static_cast<int>(top % n));
      for (size_t i = 0; i < W && v.steps_to_profile.size() < 5; ++i) {
        const StepAccounting& acc = window_.at(i).accounting;
        if (acc.stages[k].flagged) v.steps_to_profile.push_back(acc.step);
      }
      const std::string evidence_words = absl::StrFormat(
          "no rank stands out: the top suspect (%s, rank %d) is %s per step slower than its "
          "peers, %.1f standard errors",
          schema_.stage(static_cast<int>(top / n)).name, ranks_[top % n], Ms(v.rank_shift_ns),
          v.rank_z);
      // The window's own step-to-step jitter (robust standard deviation).
      const double step_spread_ns =
          kMadToSigma * static_cast<double>(MadInPlace(exposed, static_cast<int64_t>(step_ns)));
      const bool beyond_jitter = shift >= config_.group_spread_z * step_spread_ns;
      if (warm && shift >= config_.group_material_fraction * static_cast<double>(baseline) &&
          beyond_jitter) {
        v.label = VerdictLabel::kAmbiguous;
        v.reason = AmbiguityReason::kTie;
        v.group_wide = true;
        v.candidate_ranks = ranks_;
        v.candidate_stages = {k};
        v.explanation = absl::StrFormat(
            "the whole group is slower: the median exposed step is %s, %s above its baseline "
            "(steps vary by %s), most of the excess in \"%s\"; %s",
            Ms(static_cast<int64_t>(step_ns)), Ms(static_cast<int64_t>(shift)),
            Ms(static_cast<int64_t>(step_spread_ns)), schema_.stage(k).name, evidence_words);
        v.settle = absl::StrCat("the whole group is slower in \"", schema_.stage(k).name,
                                "\" (a slow collective, network or shared resource): no "
                                "rank-targeted action applies; profile any rank at steps ",
                                absl::StrJoin(v.steps_to_profile, ", "));
        return v;
      }
      v.label = VerdictLabel::kHealthy;
      v.explanation = absl::StrCat(
          "excess spread over the group, not a straggler: ", v.flagged_steps, " of ", W,
          " steps carried excess (", Ms(v.total_excess_ns), "), the median exposed step (",
          Ms(static_cast<int64_t>(step_ns)), ") is ",
          warm ? absl::StrCat(Ms(static_cast<int64_t>(shift)), " from its baseline (steps vary by ",
                              Ms(static_cast<int64_t>(step_spread_ns)),
                              beyond_jitter ? ")" : ": within that jitter)")
               : std::string("not yet compared with a baseline"),
          ", and ", evidence_words);
      if (!v.missing_ranks.empty()) {
        absl::StrAppend(&v.explanation, "; ranks not reporting: ", RankList(v.missing_ranks));
      }
      return v;
    }
    // The frontier charged ranks that waited; the evidence names the one they waited for.
    promote(strong_k, strong_m);
    note_evidence(strong_k, strong_m);
    profile_steps(strong_k, strong_m);
    v.label = VerdictLabel::kClear;
    v.candidate_ranks = {ranks_[strong_m]};
    v.candidate_stages = {strong_k};
    v.explanation = absl::StrFormat(
        "\"%s\" on rank %d takes %s per step longer than on its peers over %d steps (%.1f "
        "standard errors); the ranks charged at the stage boundaries were waiting for it",
        schema_.stage(strong_k).name, ranks_[strong_m], Ms(v.rank_shift_ns), static_cast<int>(W),
        v.rank_z);
    if (carried) {
      absl::StrAppend(&v.explanation, "; named in the window ending at step ", carried_from,
                      " and still supported here");
    }
    return v;
  }
  // A late arrival at a wait is explained by the rank's own slower stage, when it has one.
  if (schema_.IsWait(top / n)) {
    const int m = static_cast<int>(top % n);
    int best = -1;
    for (int k = 0; k < S; ++k) {
      if (!schema_.IsWait(static_cast<size_t>(k)) && supported(k, m) &&
          (best < 0 || rank_evidence.at(k, m).shift_ns > rank_evidence.at(best, m).shift_ns)) {
        best = k;
      }
    }
    if (best >= 0) promote(best, m);
  } else {
    // The rank's own durations say where its time went: another stage strongly slower on the
    // same rank, by more than the charged one, is where to look (the frontier charges where
    // the lateness surfaced: a slow optimizer step shows at the next forward's first wait).
    const int k0 = static_cast<int>(top / n);
    const int m = static_cast<int>(top % n);
    int best = -1;
    for (int k = 0; k < S; ++k) {
      if (k == k0 || schema_.IsWait(static_cast<size_t>(k))) continue;
      const double shift = rank_evidence.at(k, m).shift_ns;
      if (evident(k, m, config_.rank_z_strong, config_.rank_z_strong) &&
          shift > rank_evidence.at(k0, m).shift_ns &&
          (best < 0 || shift > rank_evidence.at(best, m).shift_ns)) {
        best = k;
      }
    }
    if (best >= 0) promote(best, m);
  }
  const int k1 = static_cast<int>(top / n);
  const int m1 = static_cast<int>(top % n);
  const int32_t r1 = ranks_[m1];
  const std::string& stage1 = schema_.stage(k1).name;
  const double share1 = cell[top] / total;
  note_evidence(k1, m1);

  // Evidence about the top cell: its margins, the steps it was charged, the next wait.
  std::vector<int64_t> margins;
  std::vector<int64_t> noise;
  std::map<int32_t, int32_t> tied_with;
  int32_t agree = 0;
  int32_t evidence = 0;
  std::map<int32_t, int32_t> also_late;
  std::vector<int32_t> late;
  for (size_t i = 0; i < W; ++i) {
    const StepAccounting& acc = window_.at(i).accounting;
    noise.push_back(acc.stages[k1].peer_noise_ns);
    for (const Attribution& a : acc.attributions) {
      if (a.stage != k1 || std::find(a.ranks.begin(), a.ranks.end(), r1) == a.ranks.end()) continue;
      margins.push_back(a.margin_ns);
      if (v.steps_to_profile.size() < 5 &&
          (v.steps_to_profile.empty() || v.steps_to_profile.back() != acc.step)) {
        v.steps_to_profile.push_back(acc.step);
      }
      for (int32_t other : a.ranks) {
        if (other != r1) ++tied_with[other];
      }
      if (a.kind == AttributionKind::kCarryOver || a.kind == AttributionKind::kLateStart) {
        ++agree;
        ++evidence;
        continue;
      }
      if (a.kind != AttributionKind::kFrontierLeader) continue;
      std::optional<size_t> wait = schema_.NextWaitStage(static_cast<size_t>(k1));
      size_t at = i;
      if (!wait) {
        wait = schema_.FirstWaitStage();
        at = i + 1;
        if (at >= W || window_.at(at).accounting.step != acc.step + 1) continue;
      }
      if (!wait || !window_.present(at, m1)) continue;
      LateSet(at, static_cast<int>(*wait), m1, &late);
      ++evidence;
      if (late.size() == 1 && late[0] == m1) {
        ++agree;
      } else {
        for (int32_t m : late) {
          if (m != m1) ++also_late[ranks_[m]];
        }
      }
    }
  }
  v.median_margin_ns = MedianInPlace(margins);
  v.tie_tolerance_ns =
      static_cast<int64_t>(config_.tie_z * static_cast<double>(MedianInPlace(noise)));
  v.wait_agreement = evidence > 0 ? static_cast<double>(agree) / evidence : -1.0;

  // Co-leaders in the same stage.
  std::vector<int32_t> co;
  for (int m = 0; m < n; ++m) {
    if (cell[static_cast<size_t>(k1) * n + m] >= config_.tie_ratio * cell[top] &&
        (m == m1 || supported(k1, m)))
      co.push_back(ranks_[m]);
  }
  // Other large candidates anywhere.
  std::vector<size_t> large;
  for (size_t c : order) {
    // The same rank's late arrival at a wait is the same fault seen from the other side.
    const bool same_fault = static_cast<int>(c % n) == m1 && schema_.IsWait(c / n);
    if (c != top && cell[c] / total >= config_.split_share && !same_fault &&
        supported(static_cast<int>(c / n), static_cast<int>(c % n)))
      large.push_back(c);
  }
  auto profile_hint = [&](const std::vector<int32_t>& ranks) {
    return absl::StrCat("profile ranks ", RankList(ranks), " at steps ",
                        absl::StrJoin(v.steps_to_profile, ", "));
  };

  // The probe's last arriver settles a tie or a concurrent lead when it singles one rank out.
  auto settled_by_probe = [&](const std::vector<int32_t>& ranks) {
    std::vector<int> members;
    for (int32_t r : ranks) members.push_back(MemberOf(r));
    int steps = 0, probe_steps = 0, at = -1;
    const int winner = ProbeLastArriver(k1, members, &steps, &probe_steps, &at);
    if (winner < 0) return false;
    const int32_t rank = ranks_[winner];
    // The probe's rank leads the suspects (the marks may have ranked a co-leader first).
    auto it = std::find_if(v.suspects.begin(), v.suspects.end(),
                           [&](const Suspect& s) { return s.stage == k1 && s.rank == rank; });
    if (it != v.suspects.end()) std::rotate(v.suspects.begin(), it, it + 1);
    v.label = VerdictLabel::kClear;
    v.reason = AmbiguityReason::kNone;
    v.candidate_ranks = {rank};
    v.candidate_stages = {k1};
    v.settle.clear();
    v.explanation = absl::StrFormat(
        "\"%s\" is led by ranks %s within noise of each other, but the collective probe shows "
        "rank %d arriving last at \"%s\"'s collective (the shortest wait) in %d of %d steps: "
        "rank %d made the others wait",
        stage1, RankList(ranks), rank, schema_.stage(at).name, steps, probe_steps, rank);
    return true;
  };

  auto clear = [&]() -> Verdict {
    v.label = VerdictLabel::kClear;
    v.reason = AmbiguityReason::kNone;
    v.candidate_ranks = {r1};
    v.candidate_stages = {k1};
    v.explanation = absl::StrFormat(
        "\"%s\" on rank %d holds %.0f%% of the excess (%s per step over %d steps, charged in %d "
        "steps); it stands out by a median %s (noise %s)",
        stage1, r1, 100.0 * share1, Ms(v.suspects[0].excess_ns / static_cast<int64_t>(W)),
        static_cast<int>(W), v.suspects[0].flagged_steps, Ms(v.median_margin_ns),
        Ms(v.tie_tolerance_ns));
    if (v.wait_agreement >= 0) {
      absl::StrAppend(&v.explanation,
                      absl::StrFormat(", and it is the last to arrive at the next wait in %.0f%% "
                                      "of them",
                                      100.0 * v.wait_agreement));
    }
    return v;
  };

  v.label = VerdictLabel::kAmbiguous;
  if (schema_.stage(k1).kind == StageKind::kMixed &&
      stage_unresolved[k1] >= 0.5 * stage_total[k1]) {
    v.reason = AmbiguityReason::kMixedSync;
    v.candidate_ranks = co;
    v.candidate_stages = {k1};
    v.explanation = absl::StrCat(
        "the excess sits in \"", stage1, "\", a mixed stage (",
        Ms(static_cast<int64_t>(stage_total[k1] / W)),
        " per step): its local work and its collective wait cannot be separated from stage "
        "marks, so the rank that made the others wait is unknown; candidates: ",
        RankList(co));
    v.settle = absl::StrCat("enable the collective probe for stage \"", stage1,
                            "\" (or split it into local work and a separate sync stage), then ",
                            profile_hint(co));
  } else if (co.size() >= 2 && settled_by_probe(co)) {
    // CLEAR, explained by the probe.
  } else if (co.size() >= 2) {
    v.reason = AmbiguityReason::kTie;
    v.candidate_ranks = co;
    v.candidate_stages = {k1};
    v.explanation = absl::StrCat(co.size(), " ranks reach the end of \"", stage1,
                                 "\" within noise of each other (", Ms(v.tie_tolerance_ns),
                                 ") and share its excess: ", RankList(co));
    v.settle = co.size() == static_cast<size_t>(n)
                   ? absl::StrCat("the whole group is slower in \"", stage1,
                                  "\" (a slow collective, network or shared resource); ",
                                  "enable the probe or profile any rank at steps ",
                                  absl::StrJoin(v.steps_to_profile, ", "))
                   : absl::StrCat(profile_hint(co), " to tell a shared cause from two faults");
  } else if (!large.empty()) {
    v.reason = AmbiguityReason::kSplit;
    v.candidate_ranks = {r1};
    v.candidate_stages = {k1};
    std::vector<std::string> parts = {
        absl::StrFormat("(%s, rank %d) %.0f%%", stage1, r1, 100.0 * share1)};
    std::vector<size_t> shown = large;
    if (shown.empty())
      shown.assign(order.begin() + 1, order.begin() + std::min<size_t>(3, order.size()));
    for (size_t c : shown) {
      const int k = static_cast<int>(c / n);
      const int32_t r = ranks_[c % n];
      parts.push_back(absl::StrFormat("(%s, rank %d) %.0f%%", schema_.stage(k).name, r,
                                      100.0 * cell[c] / total));
      if (std::find(v.candidate_ranks.begin(), v.candidate_ranks.end(), r) ==
          v.candidate_ranks.end()) {
        v.candidate_ranks.push_back(r);
      }
      if (std::find(v.candidate_stages.begin(), v.candidate_stages.end(), k) ==
          v.candidate_stages.end()) {
        v.candidate_stages.push_back(k);
      }
    }
    v.explanation =
        absl::StrCat("the excess is split between candidates: ", absl::StrJoin(parts, ", "));
    v.settle = absl::StrCat(profile_hint(v.candidate_ranks),
                            "; each candidate is a separate fault until shown otherwise");
  } else if (v.median_margin_ns < v.tie_tolerance_ns) {
    std::vector<std::pair<int32_t, int32_t>> tied(tied_with.begin(), tied_with.end());
    std::sort(tied.begin(), tied.end(), [](auto a, auto b) { return a.second > b.second; });
    std::vector<int32_t> candidates = {r1};
    for (size_t i = 0; i < tied.size() && candidates.size() < 12; ++i) {
      if (supported(k1, MemberOf(tied[i].first))) candidates.push_back(tied[i].first);
    }
    if (candidates.size() < 2) return clear();
    if (settled_by_probe(candidates)) return v;
    v.reason = AmbiguityReason::kTie;
    v.candidate_ranks = candidates;
    v.candidate_stages = {k1};
    v.explanation = absl::StrCat("rank ", r1, " leads \"", stage1, "\" by only ",
                                 Ms(v.median_margin_ns), " (noise ", Ms(v.tie_tolerance_ns),
                                 "): others reach the boundary about as late");
    v.settle = profile_hint(v.candidate_ranks);
  } else if (v.wait_agreement >= 0 && v.wait_agreement < 0.5) {
    std::vector<int32_t> candidates = {r1};
    for (const auto& [rank, count] : also_late) {
      if (supported_anywhere(MemberOf(rank))) candidates.push_back(rank);
    }
    if (candidates.size() < 2) return clear();
    if (settled_by_probe(candidates)) return v;
    v.reason = AmbiguityReason::kConcurrent;
    v.candidate_ranks = {r1};
    v.candidate_stages = {k1};
    std::vector<std::pair<int32_t, int32_t>> others(also_late.begin(), also_late.end());
    std::sort(others.begin(), others.end(), [](auto a, auto b) { return a.second > b.second; });
    for (size_t i = 0; i < others.size() && v.concurrent_ranks.size() < 8; ++i) {
      if (supported_anywhere(MemberOf(others[i].first)))
        v.concurrent_ranks.push_back(others[i].first);
    }
    std::vector<int32_t> both = {r1};
    both.insert(both.end(), v.concurrent_ranks.begin(), v.concurrent_ranks.end());
    v.explanation = absl::StrFormat(
        "rank %d leads \"%s\", but at the next wait it is the sole last arriver in only %.0f%% "
        "of those steps; ranks %s arrive late too: the lead may have run alongside another delay",
        r1, stage1, 100.0 * v.wait_agreement, RankList(v.concurrent_ranks));
    v.settle = absl::StrCat("enable the collective probe to see who arrives last, or ",
                            profile_hint(both));
  } else {
    return clear();
  }
  return v;
}

}  // namespace stagefrontier
