#include "daemon/accounting/robust_stats.h"

#include <algorithm>
#include <cstdlib>

namespace stagefrontier {

int64_t MedianInPlace(std::span<int64_t> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const int64_t upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const int64_t lower = *std::max_element(values.begin(), values.begin() + mid);
  // Halve each before adding so that values near INT64_MAX cannot overflow.
  return lower / 2 + upper / 2 + (lower % 2 + upper % 2) / 2;
}

int64_t MadInPlace(std::span<int64_t> values, int64_t median) {
  for (int64_t& v : values) v = v >= median ? v - median : median - v;
  return MedianInPlace(values);
}

double KsDistanceSorted(std::span<const int64_t> a, std::span<const int64_t> b) {
  if (a.empty() || b.empty()) return 0.0;
  size_t i = 0;
  size_t j = 0;
  double best = 0.0;
  const double na = static_cast<double>(a.size());
  const double nb = static_cast<double>(b.size());
  while (i < a.size() && j < b.size()) {
    const int64_t x = std::min(a[i], b[j]);
    while (i < a.size() && a[i] == x) ++i;
    while (j < b.size() && b[j] == x) ++j;
    best = std::max(best, std::abs(static_cast<double>(i) / na - static_cast<double>(j) / nb));
  }
  return best;
}

RollingSamples::RollingSamples(size_t capacity) : ring_(capacity == 0 ? 1 : capacity) {}

void RollingSamples::Add(int64_t value) {
  ring_[next_] = value;
  next_ = (next_ + 1) % ring_.size();
  if (count_ < ring_.size()) ++count_;
}

int64_t RollingSamples::Median() const {
  scratch_.assign(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(count_));
  return MedianInPlace(scratch_);
}

double RollingSamples::NoiseScale() const {
  scratch_.assign(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(count_));
  const int64_t med = MedianInPlace(scratch_);
  return kMadToSigma * static_cast<double>(MadInPlace(scratch_, med));
}

}  // namespace stagefrontier
