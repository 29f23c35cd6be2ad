// GroupAccountant::Report and the window statistics behind it: what-if savings, the
// dashboards' view, KS rank divergence and 3-sigma outliers.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "daemon/accounting/group_accountant.h"

namespace stagefrontier {

int64_t GroupAccountant::WhatIfSaving(int k, int member) const {
  const size_t W = window_.size();
  if (W == 0) return 0;
  const int n = window_.members();
  const int32_t rank = ranks_[member];
  int64_t saved = 0;
  for (size_t i = 0; i < W; ++i) {
    const StepAccounting& acc = window_.at(i).accounting;
    if (schema_.IsWait(static_cast<size_t>(k))) {
      // A wait stage's own excess (late starts, a slower collective) is saved whole.
      for (const Attribution& a : acc.attributions) {
        if (a.stage == k && std::find(a.ranks.begin(), a.ranks.end(), rank) != a.ranks.end()) {
          saved += a.excess_ns / static_cast<int64_t>(a.ranks.size());
        }
      }
      continue;
    }
    if (!window_.present(i, member)) continue;
    const int64_t excess = window_.duration(i, member, k) - acc.stages[k].median_duration_ns;
    if (excess <= 0) continue;
    // The next wait (this step's, or the next step's first for a tail stage) ends when the
    // last rank arrives: behaving like its peers saves this rank's excess, but no more than
    // its lead over the next rank to arrive, measured by their waits on their own clocks.
    std::optional<size_t> wait = schema_.NextWaitStage(static_cast<size_t>(k));
    size_t at = i;
    if (!wait && schema_.IsTail(static_cast<size_t>(k))) {
      wait = schema_.FirstWaitStage();
      at = i + 1;
      if (at >= W || window_.at(at).accounting.step != acc.step + 1) continue;
    }
    if (wait) {
      if (!window_.present(at, member)) continue;
      const int s = static_cast<int>(*wait);
      int64_t next_wait = std::numeric_limits<int64_t>::max();
      for (int m = 0; m < n; ++m) {
        if (m != member && wait_group_[m] == wait_group_[member] && window_.present(at, m)) {
          next_wait = std::min(next_wait, window_.duration(at, m, s));
        }
      }
      if (next_wait == std::numeric_limits<int64_t>::max()) continue;
      saved += std::clamp<int64_t>(next_wait - window_.duration(at, member, s), 0, excess);
      continue;
    }
    // No wait at all in the schema: the step ends at the frontier.
    const int last = stages_ - 1;
    int64_t others = 0;
    for (int m = 0; m < n; ++m) {
      if (m != member && window_.present(i, m))
        others = std::max(others, window_.cumulative(i, m, last));
    }
    const int64_t mine = window_.cumulative(i, member, last) - excess;
    saved += acc.stages[last].frontier_ns - std::max(mine, others);
  }
  return saved / static_cast<int64_t>(W);
}

GroupReport GroupAccountant::Report() const {
  GroupReport r;
  r.group = name_;
  r.ranks = ranks_;
  r.verdict = DecideVerdict();
  const size_t W = window_.size();
  const int n = window_.members();
  r.stages.assign(stages_, StageSummary{});
  if (W == 0) return r;

  std::vector<std::map<int32_t, int32_t>> leaders(stages_);
  std::vector<double> cell_stage_excess(stages_, 0.0);
  double sum_of_max = 0;
  for (size_t i = 0; i < W; ++i) {
    const StepAccounting& acc = window_.at(i).accounting;
    r.mean_exposed_ns += static_cast<double>(acc.exposed_ns);
    if (acc.first_excess_stage >= 0) ++r.stages[acc.first_excess_stage].first_excess_steps;
    for (int k = 0; k < stages_; ++k) {
      const StageAccounting& s = acc.stages[k];
      StageSummary& out = r.stages[k];
      out.mean_increment_ns += static_cast<double>(s.increment_ns);
      out.mean_dashboard_ns += static_cast<double>(s.mean_duration_ns);
      out.max_dashboard_ns += static_cast<double>(s.max_duration_ns);
      sum_of_max += static_cast<double>(s.max_duration_ns);
      if (s.leader >= 0) ++leaders[k][s.leader];
    }
    for (const Attribution& a : acc.attributions) {
      r.stages[a.stage].mean_excess_ns += static_cast<double>(a.excess_ns);
      cell_stage_excess[a.stage] += static_cast<double>(a.excess_ns);
    }
  }
  const double w = static_cast<double>(W);
  r.mean_exposed_ns /= w;
  r.mean_sum_of_max_ns = sum_of_max / w;
  double best_mean = 0, best_max = 0, best_frontier = 0;
  for (int k = 0; k < stages_; ++k) {
    StageSummary& out = r.stages[k];
    out.mean_increment_ns /= w;
    out.mean_dashboard_ns /= w;
    out.max_dashboard_ns /= w;
    out.mean_excess_ns /= w;
    if (baseline_[k].size() >= static_cast<size_t>(config_.warmup_steps)) {
      out.baseline_ns = static_cast<double>(baseline_[k].Median());
    }
    if (mean_dashboard_[k].size() >= static_cast<size_t>(config_.warmup_steps)) {
      out.mean_dashboard_baseline_ns = static_cast<double>(mean_dashboard_[k].Median());
      out.max_dashboard_baseline_ns = static_cast<double>(max_dashboard_[k].Median());
      const double grow_mean = out.mean_dashboard_ns - out.mean_dashboard_baseline_ns;
      const double grow_max = out.max_dashboard_ns - out.max_dashboard_baseline_ns;
      if (grow_mean > best_mean) {
        best_mean = grow_mean;
        r.mean_top_stage = k;
      }
      if (grow_max > best_max) {
        best_max = grow_max;
        r.max_top_stage = k;
      }
    }
    if (cell_stage_excess[k] > best_frontier) {
      best_frontier = cell_stage_excess[k];
      r.frontier_top_stage = k;
    }
    out.top_leaders.assign(leaders[k].begin(), leaders[k].end());
    std::sort(out.top_leaders.begin(), out.top_leaders.end(), [](auto a, auto b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    if (out.top_leaders.size() > 3) out.top_leaders.resize(3);
  }

  // 3-sigma outliers per (stage, rank), against each step's peer median and noise.
  std::vector<int32_t> outlier_steps(static_cast<size_t>(stages_) * n, 0);
  for (size_t i = 0; i < W; ++i) {
    const StepAccounting& acc = window_.at(i).accounting;
    for (int k = 0; k < stages_; ++k) {
      const double limit = static_cast<double>(acc.stages[k].median_duration_ns) +
                           3.0 * static_cast<double>(acc.stages[k].peer_noise_ns);
      for (int m = 0; m < n; ++m) {
        if (window_.present(i, m) && static_cast<double>(window_.duration(i, m, k)) > limit) {
          ++outlier_steps[static_cast<size_t>(k) * n + m];
        }
      }
    }
  }
  for (int k = 0; k < stages_; ++k) {
    for (int m = 0; m < n; ++m) {
      const double f = outlier_steps[static_cast<size_t>(k) * n + m] / w;
      if (f >= 0.1) r.outliers.push_back(StageOutlier{k, ranks_[m], f});
    }
  }
  std::sort(r.outliers.begin(), r.outliers.end(), [](const StageOutlier& a, const StageOutlier& b) {
    return a.fraction != b.fraction ? a.fraction > b.fraction : a.rank < b.rank;
  });

  // KS rank divergence: each rank's stage-duration sample against up to ks_max_peers peers.
  std::vector<int> subjects;
  r.divergence_all_ranks = n <= config_.ks_all_ranks_limit;
  if (r.divergence_all_ranks) {
    for (int m = 0; m < n; ++m) subjects.push_back(m);
  } else {
    for (const Suspect& s : r.verdict.suspects) subjects.push_back(MemberOf(s.rank));
    for (const StageOutlier& o : r.outliers) subjects.push_back(MemberOf(o.rank));
    std::sort(subjects.begin(), subjects.end());
    subjects.erase(std::unique(subjects.begin(), subjects.end()), subjects.end());
  }
  const int peer_count = std::min(n - 1, config_.ks_max_peers);
  std::vector<std::vector<int64_t>> sorted(n);
  for (int k = 0; k < stages_ && n > 1; ++k) {
    std::vector<bool> prepared(n, false);
    auto prepare = [&](int m) {
      if (prepared[m]) return;
      prepared[m] = true;
      sorted[m].clear();
      for (size_t i = 0; i < W; ++i) {
        if (window_.present(i, m)) sorted[m].push_back(window_.duration(i, m, k));
      }
      std::sort(sorted[m].begin(), sorted[m].end());
    };
    if (k == 0) r.divergence.assign(subjects.size(), RankDivergence{});
    for (size_t si = 0; si < subjects.size(); ++si) {
      const int m = subjects[si];
      prepare(m);
      double sum = 0;
      int count = 0;
      for (int j = 0; j < peer_count; ++j) {
        // Evenly spread peers, skipping the subject itself.
        int q = static_cast<int>((static_cast<int64_t>(j) * (n - 1)) / peer_count);
        if (q >= m) ++q;
        prepare(q);
        sum += KsDistanceSorted(sorted[m], sorted[q]);
        ++count;
      }
      const double ks = count ? sum / count : 0.0;
      if (k == 0 || ks > r.divergence[si].ks) r.divergence[si] = RankDivergence{ranks_[m], k, ks};
    }
  }
  std::sort(r.divergence.begin(), r.divergence.end(),
            [](const RankDivergence& a, const RankDivergence& b) {
              return a.ks != b.ks ? a.ks > b.ks : a.rank < b.rank;
            });
  return r;
}

}  // namespace stagefrontier
