#include "daemon/accounting/exit_lag.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "daemon/accounting/robust_stats.h"

namespace stagefrontier {
namespace {

// The peers' reference for member m: the other member in a pair, the median member else (the
// median of all is close enough to the others' median for three or more, and O(n) per step).
double Reference(const std::vector<int64_t>& values, double median, size_t m) {
  return values.size() == 2 ? static_cast<double>(values[1 - m]) : median;
}

}  // namespace

ExitLag LargestExitLag(const AccountingWindow& window, const StageSchema& schema, int j) {
  ExitLag out;
  if (j < 0 || j >= static_cast<int>(schema.size()) || !schema.IsWait(static_cast<size_t>(j))) {
    return out;
  }
  const std::optional<size_t> next = schema.NextWaitStage(static_cast<size_t>(j));
  if (!next) return out;
  const int k = static_cast<int>(*next);
  const int n = window.members();
  std::vector<double> sum(n, 0), sum_sq(n, 0);
  std::vector<int32_t> count(n, 0);
  std::vector<int> who;
  std::vector<int64_t> at_j, at_k, scratch;
  // MedianInPlace reorders; at_j and at_k stay in member order for the lags below.
  auto median = [&scratch](const std::vector<int64_t>& values) {
    scratch.assign(values.begin(), values.end());
    return static_cast<double>(MedianInPlace(scratch));
  };
  for (size_t i = 0; i < window.size(); ++i) {
    who.clear();
    at_j.clear();
    at_k.clear();
    for (int m = 0; m < n; ++m) {
      if (!window.present(i, m)) continue;
      who.push_back(m);
      at_j.push_back(window.cumulative(i, m, j));
      at_k.push_back(window.cumulative(i, m, k));
    }
    if (who.size() < 2) continue;
    const double med_j = median(at_j);
    const double med_k = median(at_k);
    for (size_t x = 0; x < who.size(); ++x) {
      const double lag = (static_cast<double>(at_j[x]) - Reference(at_j, med_j, x)) -
                         (static_cast<double>(at_k[x]) - Reference(at_k, med_k, x));
      sum[who[x]] += lag;
      sum_sq[who[x]] += lag * lag;
      ++count[who[x]];
    }
  }
  for (int m = 0; m < n; ++m) {
    if (count[m] < kMinExitLagSteps) continue;
    const double c = count[m];
    const double mean = sum[m] / c;
    if (out.member >= 0 && mean <= out.mean_ns) continue;
    const double var = std::max(0.0, (sum_sq[m] - c * mean * mean) / (c - 1));
    out.member = m;
    out.next_wait = k;
    out.mean_ns = mean;
    out.z = var > 0 ? mean / std::sqrt(var / c) : 0;
    out.steps = count[m];
  }
  return out;
}

}  // namespace stagefrontier
