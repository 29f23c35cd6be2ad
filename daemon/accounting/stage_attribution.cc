// GroupAccountant's per-stage attribution (docs/accounting.md, "Attribution"): the stage's
// noise, then who is charged its excess: the peer-outlier leaders of a work stage, the late
// starters of a wait stage (traced back to a slow tail when the previous step explains it),
// the leader set of a slower collective, or the probe's last arrivers in a mixed stage.
#include <algorithm>
#include <limits>

#include "daemon/accounting/group_accountant.h"

namespace stagefrontier {

void GroupAccountant::AccountStage(int64_t step, int k, const StepThresholds& t) {
  StepAccounting& acc = current_;
  const StageFrontier& f = frontier_.stages[k];
  StageAccounting& s = acc.stages[k];
  s.frontier_ns = f.frontier_ns;
  s.increment_ns = f.increment_ns;
  s.leader = members_.ranks[f.leader];
  s.margin_ns = f.margin_ns;
  s.mean_duration_ns = f.mean_duration_ns;
  s.max_duration_ns = f.max_duration_ns;
  s.median_duration_ns = f.median_duration_ns;
  s.min_duration_ns = f.min_duration_ns;
  s.min_rank = members_.ranks[f.min_member];

  const StageNoise noise = MeasureNoise(k, t);
  const size_t before = acc.attributions.size();
  if (!schema_.IsWait(k)) {
    AttributeWork(k, t, noise);
  } else {
    AttributeWait(step, k, t, noise);
  }
  for (size_t i = before; i < acc.attributions.size(); ++i) {
    if (acc.attributions[i].seen_at_stage == k) s.excess_ns += acc.attributions[i].excess_ns;
  }
  s.flagged = s.excess_ns > 0;
  if (LearnsSpreadUnflagged(k) && acc.attributions.empty()) peer_spread_[k].Add(f.spread_ns);
  if (s.flagged) {
    if (acc.first_excess_stage < 0) acc.first_excess_stage = k;
  } else {
    baseline_[k].Add(f.increment_ns);
  }
}

GroupAccountant::StageNoise GroupAccountant::MeasureNoise(int k, const StepThresholds& t) {
  const StageFrontier& f = frontier_.stages[k];
  StageAccounting& s = current_.stages[k];
  StageNoise noise;
  const double floor_k =
      std::max(static_cast<double>(config_.noise_floor_ns),
               config_.relative_noise_floor * static_cast<double>(f.median_duration_ns));
  // Two ranks' MAD is half their gap: a persistent fault of one would become the noise scale
  // and tie it with its peer (a pipeline stage's 2 replicas). Two learn from unflagged steps
  // without excess so far (AccountStage: a slow rank's gap reaches the later waits too), like
  // the temporal baseline; but a p2p stage's time is its neighbour's noise, which that would
  // underrate, so it learns from every step.
  if (!LearnsSpreadUnflagged(k)) peer_spread_[k].Add(f.spread_ns);
  noise.peer_sigma = std::max(floor_k, static_cast<double>(peer_spread_[k].Median()));
  s.peer_noise_ns = static_cast<int64_t>(noise.peer_sigma);
  noise.tol = static_cast<int64_t>(config_.tie_z * noise.peer_sigma);
  LeaderSet(matrix_, k, f.frontier_ns, noise.tol, &leaders_);
  s.leader_set = ToRanks(leaders_);

  const bool warm = baseline_[k].size() >= static_cast<size_t>(config_.warmup_steps);
  noise.noise_t = floor_k;
  if (warm) {
    s.baseline_ns = baseline_[k].Median();
    noise.noise_t = std::max(floor_k, baseline_[k].NoiseScale());
    noise.x_t = f.increment_ns - s.baseline_ns;
    s.temporal_excess_ns = noise.x_t;
  }
  s.noise_ns = static_cast<int64_t>(noise.noise_t);
  noise.temporal = warm && t.Significant(noise.x_t, noise.noise_t);
  return noise;
}

void GroupAccountant::AttributeWork(int k, const StepThresholds& t, const StageNoise& noise) {
  const StageFrontier& f = frontier_.stages[k];
  const int n = members_.size();
  // Peer counterfactual: ranks whose duration is a peer outlier behave like the median
  // instead; what the frontier loses is their excess.
  const double threshold = static_cast<double>(f.median_duration_ns) +
                           (config_.outlier_z + t.max_of_r) * noise.peer_sigma;
  const int64_t peer_ns =
      PeerDurationNs(matrix_.present_count(), f.min_duration_ns, f.median_duration_ns);
  int64_t counterfactual = std::numeric_limits<int64_t>::min();
  for (int m = 0; m < n; ++m) {
    if (!matrix_.present(m)) continue;
    const int64_t d = matrix_.duration(m, k);
    const int64_t d2 = static_cast<double>(d) > threshold ? peer_ns : d;
    counterfactual = std::max(counterfactual, matrix_.cumulative_before(m, k) + d2);
  }
  const int64_t x_p = std::max<int64_t>(0, f.frontier_ns - counterfactual);
  current_.stages[k].peer_excess_ns = x_p;
  const bool peer = t.Significant(x_p, noise.peer_sigma);
  if (!peer && !noise.temporal) return;
  resp_.clear();
  if (peer) {
    for (int32_t m : leaders_) {
      if (static_cast<double>(matrix_.duration(m, k)) > threshold) resp_.push_back(m);
    }
  }
  if (resp_.empty()) resp_ = leaders_;
  for (int32_t m : resp_) in_resp_[m] = 1;
  int64_t rest = std::numeric_limits<int64_t>::min();
  for (int m = 0; m < n; ++m) {
    if (matrix_.present(m) && !in_resp_[m]) rest = std::max(rest, matrix_.cumulative(m, k));
  }
  for (int32_t m : resp_) in_resp_[m] = 0;
  Attribution a;
  a.seen_at_stage = k;
  a.stage = k;
  a.ranks = ToRanks(resp_);
  a.excess_ns = std::max(peer ? x_p : 0, noise.temporal ? noise.x_t : 0);
  a.margin_ns = rest == std::numeric_limits<int64_t>::min() ? 0 : f.frontier_ns - rest;
  a.kind = AttributionKind::kFrontierLeader;
  if (schema_.IsTail(k)) {
    for (int32_t m : resp_) tail_charge_[m] += a.excess_ns / static_cast<int64_t>(resp_.size());
  }
  current_.attributions.push_back(std::move(a));
}

void GroupAccountant::AttributeWait(int64_t step, int k, const StepThresholds& t,
                                    const StageNoise& noise) {
  const StageFrontier& f = frontier_.stages[k];
  StageAccounting& s = current_.stages[k];
  const int n = members_.size();
  // A wait stage ends together for everyone, so its increment beyond the shortest wait is a
  // start skew: some rank began the step late on the group's clock.
  const int64_t x_skew = std::max<int64_t>(0, f.increment_ns - f.min_duration_ns);
  s.peer_excess_ns = x_skew;
  const bool skew = t.Significant(x_skew, noise.peer_sigma);
  if (skew) {
    resp_.clear();
    int64_t next_wait = std::numeric_limits<int64_t>::max();
    for (int m = 0; m < n; ++m) {
      if (!matrix_.present(m)) continue;
      const int64_t d = matrix_.duration(m, k);
      if (d <= f.min_duration_ns + noise.tol) {
        resp_.push_back(m);
      } else {
        next_wait = std::min(next_wait, d);
      }
    }
    const int64_t margin =
        next_wait == std::numeric_limits<int64_t>::max() ? 0 : next_wait - f.min_duration_ns;
    const int64_t each = x_skew / static_cast<int64_t>(resp_.size());
    for (int32_t m : resp_) ChargeLateStart(step, k, m, each, margin);
  }
  const int64_t x_rest = noise.x_t - (skew ? x_skew : 0);
  if (!noise.temporal || !t.Significant(x_rest, noise.noise_t)) return;
  Attribution a;
  a.seen_at_stage = k;
  a.stage = k;
  a.excess_ns = x_rest;
  bool probed = schema_.stage(k).kind == StageKind::kMixed;
  for (int m = 0; m < n && probed; ++m) {
    if (matrix_.present(m) && matrix_.probe_local(m, k) < 0) probed = false;
  }
  if (schema_.stage(k).kind == StageKind::kSync) {
    a.kind = AttributionKind::kGroupWait;
    a.ranks = s.leader_set;
    a.margin_ns = f.margin_ns;
  } else if (probed) {
    AttributeMixedProbe(k, noise.tol, &a);
  } else {
    a.kind = AttributionKind::kMixedUnresolved;
    a.ranks = s.leader_set;
    a.margin_ns = f.margin_ns;
  }
  current_.attributions.push_back(std::move(a));
}

void GroupAccountant::AttributeMixedProbe(int k, int64_t tol, Attribution* a) {
  // The probe separates work from waiting: the last to arrive at the collective (on its own
  // clock, from its own step start) made the others wait.
  const int n = members_.size();
  scratch_.assign(n, std::numeric_limits<int64_t>::min());
  int64_t best = std::numeric_limits<int64_t>::min();
  int64_t second = std::numeric_limits<int64_t>::min();
  for (int m = 0; m < n; ++m) {
    if (!matrix_.present(m)) continue;
    const int64_t arrival = matrix_.cumulative_before(m, k) + matrix_.probe_local(m, k);
    scratch_[m] = arrival;
    if (arrival > best) {
      second = best;
      best = arrival;
    } else if (arrival > second) {
      second = arrival;
    }
  }
  resp_.clear();
  for (int m = 0; m < n; ++m) {
    if (matrix_.present(m) && scratch_[m] >= best - tol) resp_.push_back(m);
  }
  a->kind = AttributionKind::kProbeResolved;
  a->ranks = ToRanks(resp_);
  a->margin_ns = second == std::numeric_limits<int64_t>::min() ? 0 : best - second;
}

void GroupAccountant::ChargeLateStart(int64_t step, int k, int member, int64_t charge,
                                      int64_t margin) {
  StepAccounting& acc = current_;
  // The current step is pushed only after accounting: the window's last entry is the previous.
  const size_t last = window_.size() - 1;
  const bool have_previous = window_.size() > 0 && window_.at(last).accounting.step == step - 1 &&
                             window_.present(last, member);
  // A delay already charged to this rank's tail last step is the same lost time seen again
  // from the other side of the step boundary: do not count it twice.
  if (have_previous) charge -= std::min(charge, previous_tail_charge_[member]);
  if (charge <= 0) return;
  Attribution a;
  a.seen_at_stage = k;
  a.stage = k;
  a.ranks = {members_.ranks[member]};
  a.excess_ns = charge;
  a.margin_ns = margin;
  a.kind = AttributionKind::kLateStart;
  const std::optional<size_t> first_wait = schema_.FirstWaitStage();
  if (have_previous && first_wait && static_cast<int>(*first_wait) == k) {
    int best_stage = -1;
    int64_t best_excess = 0;
    for (int j = 0; j < stages_; ++j) {
      if (!schema_.IsTail(j)) continue;
      const int64_t e = window_.duration(last, member, j) -
                        window_.at(last).accounting.stages[j].median_duration_ns;
      if (e > best_excess) {
        best_excess = e;
        best_stage = j;
      }
    }
    if (best_stage >= 0 && best_excess >= charge / 2) {
      a.stage = best_stage;
      a.kind = AttributionKind::kCarryOver;
    }
  }
  acc.attributions.push_back(std::move(a));
}

}  // namespace stagefrontier
