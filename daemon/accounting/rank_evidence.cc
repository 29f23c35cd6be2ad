#include "daemon/accounting/rank_evidence.h"

#include <algorithm>
#include <cmath>

#include "daemon/accounting/robust_stats.h"

namespace stagefrontier {

RankEvidenceTable ComputeRankEvidence(const AccountingWindow& window, const StageSchema& schema) {
  const int n = window.members();
  const int stages = window.stages();
  RankEvidenceTable table(stages, n);
  if (n < 2) return table;
  // Steps with peers to compare with: at least two members present.
  std::vector<size_t> usable;
  for (size_t i = 0; i < window.size(); ++i) {
    int present = 0;
    for (int m = 0; m < n; ++m) present += window.present(i, m) ? 1 : 0;
    if (present >= 2) usable.push_back(i);
  }
  std::vector<double> sum(n), sum_sq(n);
  std::vector<int32_t> count(n);
  std::vector<double> means;
  std::vector<int64_t> devs, pooled;  // this stage's deviations, in step then member order
  std::vector<int32_t> who;           // the member of each entry of devs
  std::vector<int32_t> outliers(n);
  std::vector<double> outlier_sum(n);
  for (int k = 0; k < stages; ++k) {
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(sum_sq.begin(), sum_sq.end(), 0.0);
    std::fill(count.begin(), count.end(), 0);
    devs.clear();
    who.clear();
    const int64_t sign = schema.IsWait(static_cast<size_t>(k)) ? -1 : 1;
    for (size_t i : usable) {
      const WindowStep& step = window.at(i);
      if (static_cast<int>(step.accounting.stages.size()) <= k) continue;
      // The frontier kept this step's median duration of the stage over present members.
      const int64_t median = step.accounting.stages[k].median_duration_ns;
      for (int m = 0; m < n; ++m) {
        if (!window.present(i, m)) continue;
        // Durations are below a day (shm/record_limits.h): exact in a double.
        const int64_t dev = sign * (window.duration(i, m, k) - median);
        devs.push_back(dev);
        who.push_back(m);
        sum[m] += static_cast<double>(dev);
        sum_sq[m] += static_cast<double>(dev) * static_cast<double>(dev);
        ++count[m];
      }
    }
    means.clear();
    double within = 0;
    int64_t dof = 0;
    for (int m = 0; m < n; ++m) {
      if (count[m] == 0) continue;
      const double mean = sum[m] / count[m];
      means.push_back(mean);
      within += std::max(0.0, sum_sq[m] - count[m] * mean * mean);
      dof += count[m] - 1;
    }
    if (means.size() < 2) continue;
    std::sort(means.begin(), means.end());
    const size_t half = means.size() / 2;
    const double center = means.size() % 2 == 1 ? means[half] : (means[half - 1] + means[half]) / 2;
    // Outlier steps: beyond kOutlierScales robust scales of the pooled deviations.
    pooled = devs;
    const int64_t pooled_median = MedianInPlace(pooled);
    const double scale = kMadToSigma * static_cast<double>(MadInPlace(pooled, pooled_median));
    std::fill(outliers.begin(), outliers.end(), 0);
    std::fill(outlier_sum.begin(), outlier_sum.end(), 0.0);
    const double limit = static_cast<double>(pooled_median) + kOutlierScales * scale;
    for (size_t e = 0; e < devs.size() && scale > 0; ++e) {
      if (static_cast<double>(devs[e]) > limit) {
        ++outliers[who[e]];
        outlier_sum[who[e]] += static_cast<double>(devs[e] - pooled_median);
      }
    }
    int64_t all_outliers = 0, all_steps = 0;
    for (int m = 0; m < n; ++m) {
      all_outliers += outliers[m];
      all_steps += count[m];
    }
    const double sd = dof > 0 ? std::sqrt(within / static_cast<double>(dof)) : 0.0;
    for (int m = 0; m < n; ++m) {
      RankEvidence& e = table.at(k, m);
      e.steps = count[m];
      if (count[m] == 0) continue;
      e.shift_ns = sum[m] / count[m] - center;
      e.outlier_steps = outliers[m];
      if (outliers[m] > 0) e.outlier_excess_ns = outlier_sum[m] / outliers[m];
      const int64_t other_steps = all_steps - count[m];
      if (other_steps > 0 && outliers[m] >= kMinOutlierSteps) {
        // The others' rate, floored at one outlier in their steps: never a zero variance.
        const double p = std::max<double>(1.0, static_cast<double>(all_outliers - outliers[m])) /
                         static_cast<double>(other_steps);
        const double expect = p * count[m];
        e.outlier_z = (outliers[m] - expect) / std::sqrt(std::max(1e-9, expect * (1 - p)));
      }
      e.z = sd > 0 && count[m] >= 2 ? e.shift_ns * std::sqrt(static_cast<double>(count[m])) / sd
                                    : 0.0;
    }
  }
  return table;
}

}  // namespace stagefrontier
