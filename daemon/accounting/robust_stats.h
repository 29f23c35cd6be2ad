// Robust statistics used by the accounting engine: medians, MAD noise scales, a rolling
// window of recent samples, and the Kolmogorov–Smirnov distance between two samples.
//
//   RollingSamples window(64);
//   window.Add(1200); window.Add(1300);
//   int64_t med = window.Median();        // 1250
//   double sigma = window.NoiseScale();   // 1.4826 * MAD
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_ROBUST_STATS_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_ROBUST_STATS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace stagefrontier {

// 1.4826 * MAD estimates the standard deviation of normally distributed data.
inline constexpr double kMadToSigma = 1.4826;

// Median of `values` (mean of the two middle values for an even count, rounded toward
// zero). Reorders `values`. Returns 0 for an empty span.
int64_t MedianInPlace(std::span<int64_t> values);

// Median absolute deviation from `median`. Overwrites `values` with the deviations.
int64_t MadInPlace(std::span<int64_t> values, int64_t median);

// MedianInPlace of a set of `total` values known by a band of them: `below` values lie under
// every value of `band` and the rest above it (a walk counted them and kept the band). Reorders
// `band`. nullopt when the median's ranks are not in the band.
std::optional<int64_t> MedianOfBand(std::span<int64_t> band, size_t below, size_t total);

// Kolmogorov–Smirnov distance sup|F_a - F_b| between two *sorted* samples, in [0, 1].
// Returns 0 when either sample is empty.
double KsDistanceSorted(std::span<const int64_t> a, std::span<const int64_t> b);

// The last `capacity` samples of a series, with robust summaries over them.
class RollingSamples {
 public:
  explicit RollingSamples(size_t capacity);

  void Add(int64_t value);
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  // Median of the retained samples; 0 when empty.
  int64_t Median() const;
  // 1.4826 * MAD of the retained samples; 0 when empty.
  double NoiseScale() const;

 private:
  std::vector<int64_t> ring_;
  size_t next_ = 0;
  size_t count_ = 0;
  mutable std::vector<int64_t> scratch_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_ROBUST_STATS_H_
