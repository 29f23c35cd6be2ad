#include "daemon/accounting/group_accountant.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace stagefrontier {

GroupAccountant::GroupAccountant(std::string name, const StageSchema& schema,
                                 std::vector<int32_t> ranks, const EngineConfig& config,
                                 std::vector<int32_t> wait_group)
    : name_(std::move(name)),
      schema_(schema),
      ranks_(std::move(ranks)),
      config_(config),
      wait_group_(wait_group.empty() ? std::vector<int32_t>(ranks_.size(), 0)
                                     : std::move(wait_group)),
      stages_(static_cast<int>(schema.size())),
      matrix_(static_cast<int>(ranks_.size()), stages_),
      window_(static_cast<size_t>(config.window_steps), static_cast<int>(ranks_.size()), stages_),
      exposed_history_(static_cast<size_t>(config.baseline_steps)),
      exposed_baseline_(static_cast<size_t>(config.baseline_steps)),
      baseline_(stages_, RollingSamples(static_cast<size_t>(config.baseline_steps))),
      peer_spread_(stages_, RollingSamples(static_cast<size_t>(config.baseline_steps))),
      mean_dashboard_(stages_, RollingSamples(static_cast<size_t>(config.baseline_steps))),
      max_dashboard_(stages_, RollingSamples(static_cast<size_t>(config.baseline_steps))),
      previous_tail_charge_(ranks_.size(), 0),
      tail_charge_(ranks_.size(), 0),
      in_resp_(ranks_.size(), 0) {
  const int32_t largest = ranks_.empty() ? 0 : *std::max_element(ranks_.begin(), ranks_.end());
  member_of_rank_.assign(static_cast<size_t>(largest) + 1, -1);
  for (size_t i = 0; i < ranks_.size(); ++i) member_of_rank_[ranks_[i]] = static_cast<int32_t>(i);
}

std::vector<int32_t> GroupAccountant::ToRanks(std::span<const int32_t> members) const {
  std::vector<int32_t> out;
  out.reserve(members.size());
  for (int32_t m : members) out.push_back(ranks_[m]);
  return out;
}

int GroupAccountant::MemberOf(int32_t rank) const {
  return rank >= 0 && static_cast<size_t>(rank) < member_of_rank_.size() ? member_of_rank_[rank]
                                                                         : -1;
}

const StepAccounting& GroupAccountant::Account(int64_t step,
                                               std::span<const RankStep* const> by_member) {
  const int n = static_cast<int>(ranks_.size());
  matrix_.Reset();
  probe_wait_.assign(static_cast<size_t>(n) * stages_, -1);
  for (int m = 0; m < n; ++m) {
    const RankStep* r = by_member[m];
    if (r == nullptr) continue;
    matrix_.SetMember(m, r->boundaries_ns);
    // The probe's view of a stage: the rank waited at its last collective from entering it
    // to its completion; in a mixed stage, local work lasts until that entry. Spans that the
    // stage marks do not bracket are not evidence.
    for (int k = 0; k < stages_; ++k) {
      int64_t latest_exit = std::numeric_limits<int64_t>::min();
      const ProbeSpan* last = nullptr;
      for (const ProbeSpan& span : r->probe) {
        if (static_cast<int>(span.stage) == k && span.exit_ns > latest_exit &&
            span.enter_ns >= r->boundaries_ns[k] && span.exit_ns <= r->boundaries_ns[k + 1] &&
            (bracketing_ == nullptr || bracketing_->Bracketed(*r, span))) {
          latest_exit = span.exit_ns;
          last = &span;
        }
      }
      if (last == nullptr) continue;
      probe_wait_[static_cast<size_t>(m) * stages_ + k] = last->exit_ns - last->enter_ns;
      if (schema_.stage(k).kind == StageKind::kMixed) {
        matrix_.SetProbeLocal(m, k, last->enter_ns - r->boundaries_ns[k]);
      }
    }
  }
  ComputeFrontier(matrix_, &frontier_, &scratch_);

  StepAccounting& acc = current_;
  acc.step = step;
  acc.exposed_ns = frontier_.exposed_ns;
  acc.missing_ranks.clear();
  for (int m = 0; m < n; ++m) {
    if (!matrix_.present(m)) acc.missing_ranks.push_back(ranks_[m]);
  }
  acc.partial = !acc.missing_ranks.empty();
  acc.first_excess_stage = -1;
  acc.stages.assign(stages_, StageAccounting{});
  acc.attributions.clear();
  std::fill(tail_charge_.begin(), tail_charge_.end(), 0);

  const int present = matrix_.present_count();
  if (present > 0) {
    exposed_history_.Add(acc.exposed_ns);
    const int64_t median_step = exposed_history_.Median();
    const int64_t min_excess = std::max<int64_t>(
        config_.noise_floor_ns,
        static_cast<int64_t>(config_.min_excess_fraction * static_cast<double>(median_step)));
    // Where the largest of `present` healthy ranks normally lands, in noise scales.
    const double max_of_r = std::sqrt(2.0 * std::log(std::max(present, 2)));
    auto significant = [&](int64_t x, double sigma) {
      return x > min_excess && static_cast<double>(x) > config_.excess_z * sigma;
    };

    for (int k = 0; k < stages_; ++k) {
      const StageFrontier& f = frontier_.stages[k];
      StageAccounting& s = acc.stages[k];
      s.frontier_ns = f.frontier_ns;
      s.increment_ns = f.increment_ns;
      s.leader = ranks_[f.leader];
      s.margin_ns = f.margin_ns;
      s.mean_duration_ns = f.mean_duration_ns;
      s.max_duration_ns = f.max_duration_ns;
      s.median_duration_ns = f.median_duration_ns;
      s.min_duration_ns = f.min_duration_ns;
      s.min_rank = ranks_[f.min_member];

      const double floor_k =
          std::max(static_cast<double>(config_.noise_floor_ns),
                   config_.relative_noise_floor * static_cast<double>(f.median_duration_ns));
      peer_spread_[k].Add(f.spread_ns);
      const double peer_sigma = std::max(floor_k, static_cast<double>(peer_spread_[k].Median()));
      s.peer_noise_ns = static_cast<int64_t>(peer_sigma);
      const int64_t tol = static_cast<int64_t>(config_.tie_z * peer_sigma);
      LeaderSet(matrix_, k, f.frontier_ns, tol, &members_);
      s.leader_set = ToRanks(members_);

      const bool warm = baseline_[k].size() >= static_cast<size_t>(config_.warmup_steps);
      double noise_t = floor_k;
      int64_t x_t = 0;
      if (warm) {
        s.baseline_ns = baseline_[k].Median();
        noise_t = std::max(floor_k, baseline_[k].NoiseScale());
        x_t = f.increment_ns - s.baseline_ns;
        s.temporal_excess_ns = x_t;
      }
      s.noise_ns = static_cast<int64_t>(noise_t);
      const bool temporal = warm && significant(x_t, noise_t);
      const size_t before = acc.attributions.size();

      if (!schema_.IsWait(k)) {
        // Peer counterfactual: ranks whose duration is a peer outlier behave like the
        // median instead; what the frontier loses is their excess.
        const double threshold =
            static_cast<double>(f.median_duration_ns) + (config_.outlier_z + max_of_r) * peer_sigma;
        int64_t counterfactual = std::numeric_limits<int64_t>::min();
        for (int m = 0; m < n; ++m) {
          if (!matrix_.present(m)) continue;
          const int64_t d = matrix_.duration(m, k);
          const int64_t d2 = static_cast<double>(d) > threshold ? f.median_duration_ns : d;
          counterfactual = std::max(counterfactual, matrix_.cumulative_before(m, k) + d2);
        }
        const int64_t x_p = std::max<int64_t>(0, f.frontier_ns - counterfactual);
        s.peer_excess_ns = x_p;
        const bool peer = significant(x_p, peer_sigma);
        if (peer || temporal) {
          resp_.clear();
          if (peer) {
            for (int32_t m : members_) {
              if (static_cast<double>(matrix_.duration(m, k)) > threshold) resp_.push_back(m);
            }
          }
          if (resp_.empty()) resp_ = members_;
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
          a.excess_ns = std::max(peer ? x_p : 0, temporal ? x_t : 0);
          a.margin_ns = rest == std::numeric_limits<int64_t>::min() ? 0 : f.frontier_ns - rest;
          a.kind = AttributionKind::kFrontierLeader;
          if (schema_.IsTail(k)) {
            for (int32_t m : resp_) {
              tail_charge_[m] += a.excess_ns / static_cast<int64_t>(resp_.size());
            }
          }
          acc.attributions.push_back(std::move(a));
        }
      } else {
        // A wait stage ends together for everyone, so its increment beyond the shortest
        // wait is a start skew: some rank began the step late on the group's clock.
        const int64_t x_skew = std::max<int64_t>(0, f.increment_ns - f.min_duration_ns);
        s.peer_excess_ns = x_skew;
        const bool skew = significant(x_skew, peer_sigma);
        if (skew) {
          resp_.clear();
          int64_t next_wait = std::numeric_limits<int64_t>::max();
          for (int m = 0; m < n; ++m) {
            if (!matrix_.present(m)) continue;
            const int64_t d = matrix_.duration(m, k);
            if (d <= f.min_duration_ns + tol) {
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
        const int64_t x_rest = x_t - (skew ? x_skew : 0);
        if (temporal && significant(x_rest, noise_t)) {
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
            // The probe separates work from waiting: the last to arrive at the collective
            // (on its own clock, from its own step start) made the others wait.
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
            a.kind = AttributionKind::kProbeResolved;
            a.ranks = ToRanks(resp_);
            a.margin_ns = second == std::numeric_limits<int64_t>::min() ? 0 : best - second;
          } else {
            a.kind = AttributionKind::kMixedUnresolved;
            a.ranks = s.leader_set;
            a.margin_ns = f.margin_ns;
          }
          acc.attributions.push_back(std::move(a));
        }
      }

      for (size_t i = before; i < acc.attributions.size(); ++i) {
        if (acc.attributions[i].seen_at_stage == k) s.excess_ns += acc.attributions[i].excess_ns;
      }
      s.flagged = s.excess_ns > 0;
      if (s.flagged) {
        if (acc.first_excess_stage < 0) acc.first_excess_stage = k;
      } else {
        baseline_[k].Add(f.increment_ns);
      }
    }
    if (exposed_baseline_.size() < static_cast<size_t>(config_.warmup_steps)) {
      acc.exposed_baseline_ns = -1;
      exposed_baseline_.Add(acc.exposed_ns);
    } else {
      const int64_t median = exposed_baseline_.Median();
      acc.exposed_baseline_ns = median;
      const double noise =
          std::max(static_cast<double>(config_.noise_floor_ns), exposed_baseline_.NoiseScale());
      // Unlike the stage baselines, a step above the threshold is left out: a group-wide
      // slowdown must stay visible against the level the group had before it.
      if (static_cast<double>(acc.exposed_ns) <=
          static_cast<double>(median) + config_.excess_z * noise) {
        exposed_baseline_.Add(acc.exposed_ns);
      }
    }
    // The dashboards' own baselines learn only from steps with no excess anywhere: a stall
    // in one stage shows up in another stage's mean (the waits), which must not be learnt.
    if (acc.attributions.empty()) {
      for (int k = 0; k < stages_; ++k) {
        mean_dashboard_[k].Add(frontier_.stages[k].mean_duration_ns);
        max_dashboard_[k].Add(frontier_.stages[k].max_duration_ns);
      }
    }
  }

  // Lag behind the frontier, for every rank of the group.
  acc.lag_ns.assign(static_cast<size_t>(n) * stages_, -1);
  for (int m = 0; m < n; ++m) {
    if (!matrix_.present(m)) continue;
    for (int k = 0; k < stages_; ++k) {
      acc.lag_ns[static_cast<size_t>(m) * stages_ + k] =
          frontier_.stages[k].frontier_ns - matrix_.cumulative(m, k);
    }
  }

  // This step becomes the window's last entry: the previous step for the next one.
  previous_tail_charge_.swap(tail_charge_);

  window_.Push(acc, matrix_, probe_wait_);
  return acc;
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
  a.ranks = {ranks_[member]};
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

int GroupAccountant::ProbeLastArriver(int k, const std::vector<int>& candidates, int* steps,
                                      int* evidence, int* at_stage) const {
  *steps = 0;
  *evidence = 0;
  *at_stage = -1;
  const size_t W = window_.size();
  auto has_probe = [&](int stage) {
    for (size_t i = 0; i < W; ++i) {
      for (int m = 0; m < window_.members(); ++m) {
        if (window_.present(i, m) && window_.probe_wait(i, m, stage) >= 0) return true;
      }
    }
    return false;
  };
  int stage = k;
  if (!has_probe(stage)) {
    std::optional<size_t> next = schema_.NextWaitStage(static_cast<size_t>(k));
    if (!next || !has_probe(static_cast<int>(*next))) return -1;
    stage = static_cast<int>(*next);
  }
  *at_stage = stage;
  std::vector<int> wins(window_.members(), 0);
  for (size_t i = 0; i < W; ++i) {
    // The single shortest wait among the candidates' sync group, if every candidate was seen.
    bool complete = true;
    for (int c : candidates) complete = complete && window_.probe_wait(i, c, stage) >= 0;
    if (!complete) continue;
    const int32_t group = wait_group_[candidates.front()];
    int best = -1;
    int64_t shortest = std::numeric_limits<int64_t>::max();
    int64_t second = std::numeric_limits<int64_t>::max();
    for (int m = 0; m < window_.members(); ++m) {
      const int64_t w = window_.present(i, m) ? window_.probe_wait(i, m, stage) : -1;
      if (w < 0 || wait_group_[m] != group) continue;
      if (w < shortest) {
        second = shortest;
        shortest = w;
        best = m;
      } else if (w < second) {
        second = w;
      }
    }
    ++*evidence;
    if (best >= 0 && second > shortest) ++wins[best];
  }
  int winner = -1;
  for (int c : candidates) {
    if (winner < 0 || wins[c] > wins[winner]) winner = c;
  }
  if (winner < 0 || *evidence < std::max(3, config_.min_flagged_steps)) return -1;
  *steps = wins[winner];
  return 3 * wins[winner] >= 2 * *evidence ? winner : -1;
}

void GroupAccountant::LateSet(size_t i, int k, int member, std::vector<int32_t>* out) const {
  out->clear();
  const StageAccounting& s = window_.at(i).accounting.stages[k];
  const int64_t tol = static_cast<int64_t>(config_.tie_z * static_cast<double>(s.peer_noise_ns));
  const int32_t group = wait_group_[member];
  int64_t shortest = std::numeric_limits<int64_t>::max();
  for (int m = 0; m < window_.members(); ++m) {
    if (wait_group_[m] == group && window_.present(i, m)) {
      shortest = std::min(shortest, window_.duration(i, m, k));
    }
  }
  for (int m = 0; m < window_.members(); ++m) {
    if (wait_group_[m] == group && window_.present(i, m) &&
        window_.duration(i, m, k) <= shortest + tol) {
      out->push_back(m);
    }
  }
}

}  // namespace stagefrontier
