#include "daemon/accounting/robust_stats.h"

#include <algorithm>
#include <cstdlib>

namespace stagefrontier {

namespace {

// The order statistics `k - 1` (when `pair`) and `k` of `values`, by nth_element.
void SelectInPlace(std::span<int64_t> values, size_t k, bool pair, int64_t* lower, int64_t* upper) {
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  *upper = values[k];
  *lower = pair ? *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k))
                : *upper;
}

// The same, exactly, for large spans (issue 33: at 100,000 ranks a window's pooled deviations
// are millions of values a stage, and nth_element over them, cache miss after cache miss, was
// most of a window's verdict time): a fixed-stride sample brackets the wanted rank in [lo, hi],
// one branch-free pass counts the values below lo and copies those inside, and nth_element runs
// on the copy. If the bracket missed (the sample is not the data's shape), the plain way.
void Select(std::span<int64_t> values, size_t k, bool pair, int64_t* lower, int64_t* upper) {
  constexpr size_t kSample = 16'384;
  constexpr size_t kMargin = 256;  // sample ranks either side of k: ~4 standard errors
  const size_t n = values.size();
  if (n < 4 * kSample) return SelectInPlace(values, k, pair, lower, upper);
  const size_t stride = n / kSample;
  // Per thread, kept: fresh buffers of megabytes were page faults and zeroing at every call.
  // They hold at most ~6% of the largest span the thread took (5 MB for 10 M values).
  thread_local std::vector<int64_t> sample, inside;
  sample.clear();
  for (size_t i = 0; i < n; i += stride) sample.push_back(values[i]);
  const size_t at = static_cast<size_t>(static_cast<double>(k) / n * sample.size());
  const size_t a = at > kMargin ? at - kMargin : 0;
  const size_t b = std::min(sample.size() - 1, at + kMargin);
  std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(a), sample.end());
  const int64_t lo = sample[a];
  std::nth_element(sample.begin() + static_cast<std::ptrdiff_t>(a),
                   sample.begin() + static_cast<std::ptrdiff_t>(b), sample.end());
  const int64_t hi = sample[b];
  // Room for twice the bracket's expected share; a fuller one means a bad bracket.
  const size_t cap = (b - a + 1) * 2 * stride + 1024;
  if (inside.size() < cap + 1) inside.resize(cap + 1);
  size_t below = 0, count = 0;
  for (size_t i = 0; i < n && count < cap; ++i) {
    const int64_t x = values[i];
    below += x < lo ? 1 : 0;
    inside[count] = x;
    count += (x >= lo) & (x <= hi);
  }
  const size_t first = pair ? k - 1 : k;
  if (count == cap || first < below || k >= below + count) {
    return SelectInPlace(values, k, pair, lower, upper);
  }
  SelectInPlace(std::span<int64_t>(inside.data(), count), k - below, pair, lower, upper);
}

// The median from its two middle values (one for an odd count).
int64_t Middle(int64_t lower, int64_t upper, bool even) {
  if (!even) return upper;
  // Halve each before adding so that values near INT64_MAX cannot overflow.
  return lower / 2 + upper / 2 + (lower % 2 + upper % 2) / 2;
}

}  // namespace

int64_t MedianInPlace(std::span<int64_t> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  const bool even = values.size() % 2 == 0;
  int64_t lower = 0, upper = 0;
  Select(values, mid, even, &lower, &upper);
  return Middle(lower, upper, even);
}

std::optional<int64_t> MedianOfBand(std::span<int64_t> band, size_t below, size_t total) {
  if (total == 0) return int64_t{0};
  const size_t mid = total / 2;
  const bool even = total % 2 == 0;
  // The ranks wanted: mid, and mid - 1 for an even count (the band's values before mid's).
  if ((even ? mid - 1 : mid) < below || mid >= below + band.size()) return std::nullopt;
  int64_t lower = 0, upper = 0;
  Select(band, mid - below, even, &lower, &upper);
  return Middle(lower, upper, even);
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
