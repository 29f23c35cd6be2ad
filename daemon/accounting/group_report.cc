// GroupAccountant::Report and the window statistics behind it: the dashboards' view, KS rank
// divergence and 3-sigma outliers.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "daemon/accounting/group_accountant.h"

namespace stagefrontier {
namespace {

// The rolling baselines a report compares the window with.
struct ReportBaselines {
  const std::vector<RollingSamples>& increment;
  const std::vector<RollingSamples>& mean_dashboard;
  const std::vector<RollingSamples>& max_dashboard;
  size_t warmup_steps;
};

// Window sums per stage; the excess per stage is returned for choosing the frontier's top.
std::vector<double> SumStages(const AccountingWindow& window, int stages,
                              std::vector<std::map<int32_t, int32_t>>* leaders, GroupReport* r) {
  std::vector<double> stage_excess(stages, 0.0);
  double sum_of_max = 0;
  for (size_t i = 0; i < window.size(); ++i) {
    const StepAccounting& acc = window.at(i).accounting;
    r->mean_exposed_ns += static_cast<double>(acc.exposed_ns);
    if (acc.first_excess_stage >= 0) ++r->stages[acc.first_excess_stage].first_excess_steps;
    for (int k = 0; k < stages; ++k) {
      const StageAccounting& s = acc.stages[k];
      StageSummary& out = r->stages[k];
      out.mean_increment_ns += static_cast<double>(s.increment_ns);
      out.mean_dashboard_ns += static_cast<double>(s.mean_duration_ns);
      out.max_dashboard_ns += static_cast<double>(s.max_duration_ns);
      sum_of_max += static_cast<double>(s.max_duration_ns);
      if (s.leader >= 0) ++(*leaders)[k][s.leader];
    }
    for (const Attribution& a : acc.attributions) {
      r->stages[a.stage].mean_excess_ns += static_cast<double>(a.excess_ns);
      stage_excess[a.stage] += static_cast<double>(a.excess_ns);
    }
  }
  r->mean_sum_of_max_ns = sum_of_max;
  return stage_excess;
}

// Turns the sums into means, adds the baselines, and picks the stage each view blames.
void SummarizeStages(const AccountingWindow& window, const ReportBaselines& b, GroupReport* r) {
  const int stages = static_cast<int>(r->stages.size());
  std::vector<std::map<int32_t, int32_t>> leaders(stages);
  const std::vector<double> stage_excess = SumStages(window, stages, &leaders, r);
  const double w = static_cast<double>(window.size());
  r->mean_exposed_ns /= w;
  r->mean_sum_of_max_ns /= w;
  double best_mean = 0, best_max = 0, best_frontier = 0;
  for (int k = 0; k < stages; ++k) {
    StageSummary& out = r->stages[k];
    out.mean_increment_ns /= w;
    out.mean_dashboard_ns /= w;
    out.max_dashboard_ns /= w;
    out.mean_excess_ns /= w;
    if (b.increment[k].size() >= b.warmup_steps) {
      out.baseline_ns = static_cast<double>(b.increment[k].Median());
    }
    if (b.mean_dashboard[k].size() >= b.warmup_steps) {
      out.mean_dashboard_baseline_ns = static_cast<double>(b.mean_dashboard[k].Median());
      out.max_dashboard_baseline_ns = static_cast<double>(b.max_dashboard[k].Median());
      const double grow_mean = out.mean_dashboard_ns - out.mean_dashboard_baseline_ns;
      const double grow_max = out.max_dashboard_ns - out.max_dashboard_baseline_ns;
      if (grow_mean > best_mean) {
        best_mean = grow_mean;
        r->mean_top_stage = k;
      }
      if (grow_max > best_max) {
        best_max = grow_max;
        r->max_top_stage = k;
      }
    }
    if (stage_excess[k] > best_frontier) {
      best_frontier = stage_excess[k];
      r->frontier_top_stage = k;
    }
    out.top_leaders.assign(leaders[k].begin(), leaders[k].end());
    std::sort(out.top_leaders.begin(), out.top_leaders.end(), [](auto a, auto c) {
      return a.second != c.second ? a.second > c.second : a.first < c.first;
    });
    if (out.top_leaders.size() > 3) out.top_leaders.resize(3);
  }
}

// 3-sigma outliers per (stage, rank), against each step's peer median and noise.
std::vector<StageOutlier> FindOutliers(const AccountingWindow& window,
                                       const std::vector<int32_t>& ranks) {
  const int n = window.members();
  const int stages = window.stages();
  std::vector<int32_t> outlier_steps(static_cast<size_t>(stages) * n, 0);
  for (size_t i = 0; i < window.size(); ++i) {
    const StepAccounting& acc = window.at(i).accounting;
    for (int k = 0; k < stages; ++k) {
      const double limit = static_cast<double>(acc.stages[k].median_duration_ns) +
                           3.0 * static_cast<double>(acc.stages[k].peer_noise_ns);
      for (int m = 0; m < n; ++m) {
        if (window.present(i, m) && static_cast<double>(window.duration(i, m, k)) > limit) {
          ++outlier_steps[static_cast<size_t>(k) * n + m];
        }
      }
    }
  }
  std::vector<StageOutlier> out;
  const double w = static_cast<double>(window.size());
  for (int k = 0; k < stages; ++k) {
    for (int m = 0; m < n; ++m) {
      const double f = outlier_steps[static_cast<size_t>(k) * n + m] / w;
      if (f >= 0.1) out.push_back(StageOutlier{k, ranks[m], f});
    }
  }
  std::sort(out.begin(), out.end(), [](const StageOutlier& a, const StageOutlier& b) {
    return a.fraction != b.fraction ? a.fraction > b.fraction : a.rank < b.rank;
  });
  return out;
}

// KS rank divergence: each subject's stage-duration sample against up to `max_peers` peers,
// evenly spread; per subject, the stage where it diverges most.
std::vector<RankDivergence> RankDivergences(const AccountingWindow& window,
                                            const std::vector<int32_t>& ranks,
                                            const std::vector<int>& subjects, int max_peers) {
  const int n = window.members();
  const int peer_count = std::min(n - 1, max_peers);
  std::vector<RankDivergence> out;
  std::vector<std::vector<int64_t>> sorted(n);
  for (int k = 0; k < window.stages() && n > 1; ++k) {
    std::vector<bool> prepared(n, false);
    auto prepare = [&](int m) {
      if (prepared[m]) return;
      prepared[m] = true;
      sorted[m].clear();
      for (size_t i = 0; i < window.size(); ++i) {
        if (window.present(i, m)) sorted[m].push_back(window.duration(i, m, k));
      }
      std::sort(sorted[m].begin(), sorted[m].end());
    };
    if (k == 0) out.assign(subjects.size(), RankDivergence{});
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
      if (k == 0 || ks > out[si].ks) out[si] = RankDivergence{ranks[m], k, ks};
    }
  }
  std::sort(out.begin(), out.end(), [](const RankDivergence& a, const RankDivergence& b) {
    return a.ks != b.ks ? a.ks > b.ks : a.rank < b.rank;
  });
  return out;
}

}  // namespace

GroupReport GroupAccountant::Report() const {
  GroupReport r;
  r.group = name_;
  r.ranks = members_.ranks;
  r.verdict = DecideVerdict();
  r.stages.assign(stages_, StageSummary{});
  if (window_.size() == 0) return r;
  SummarizeStages(
      window_,
      {baseline_, mean_dashboard_, max_dashboard_, static_cast<size_t>(config_.warmup_steps)}, &r);
  r.outliers = FindOutliers(window_, members_.ranks);
  // Every rank in small groups; in large ones only the suspects and the outliers.
  const int n = window_.members();
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
  r.divergence = RankDivergences(window_, members_.ranks, subjects, config_.ks_max_peers);
  return r;
}

}  // namespace stagefrontier
