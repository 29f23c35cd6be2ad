#include "daemon/accounting/robust_stats.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <climits>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace stagefrontier {
namespace {

TEST_CASE("median and MAD", "[robust_stats]") {
  std::vector<int64_t> v = {5, 1, 9, 3, 7};
  CHECK(MedianInPlace(v) == 5);
  std::vector<int64_t> even = {4, 1, 3, 2};
  CHECK(MedianInPlace(even) == 2);  // (2 + 3) / 2 rounded toward zero
  std::vector<int64_t> big = {INT64_MAX, INT64_MAX - 2};
  CHECK(MedianInPlace(big) == INT64_MAX - 1);  // no overflow
  std::vector<int64_t> empty;
  CHECK(MedianInPlace(empty) == 0);
  std::vector<int64_t> dev = {1, 2, 3, 4, 100};
  CHECK(MadInPlace(dev, 3) == 1);  // |deviations| = 2 1 0 1 97
}

// The median by sorting a copy: what MedianInPlace must return for any input.
int64_t SortedMedian(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  const size_t mid = v.size() / 2;
  if (v.size() % 2 == 1) return v[mid];
  const int64_t lower = v[mid - 1], upper = v[mid];
  return lower / 2 + upper / 2 + (lower % 2 + upper % 2) / 2;
}

// Large spans take a sampled bracket (robust_stats.cc): exact for every shape, including ones
// that fool the sample (it then falls back to the plain selection).
TEST_CASE("median and MAD of large spans are exact, whatever their shape", "[robust_stats]") {
  std::mt19937_64 rng(20261130);
  std::normal_distribution<double> normal(0, 50'000);
  const size_t n =
      GENERATE(size_t{65'535}, size_t{65'536}, size_t{65'537}, size_t{300'001}, size_t{300'002});
  const std::string shape =
      GENERATE(as<std::string>{}, "jitter with tails", "all equal", "many ties", "ascending",
               "descending", "the sample sees only outliers", "extremes");
  CAPTURE(n, shape);
  std::vector<int64_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    if (shape == "jitter with tails") {
      v[i] = rng() % 100 == 0 ? static_cast<int64_t>(rng() % 1'000'000'000)
                              : static_cast<int64_t>(normal(rng));
    } else if (shape == "all equal") {
      v[i] = 7;
    } else if (shape == "many ties") {
      v[i] = static_cast<int64_t>(rng() % 4'096);  // runs of equal values at the bracket's ends
    } else if (shape == "ascending") {
      v[i] = static_cast<int64_t>(i);
    } else if (shape == "descending") {
      v[i] = -static_cast<int64_t>(i);
    } else if (shape == "the sample sees only outliers") {
      v[i] = i % (n / 16'384) == 0 ? 1'000'000'000 + static_cast<int64_t>(i) : int64_t(i % 1'000);
    } else {
      v[i] = i % 3 == 0 ? INT64_MAX - static_cast<int64_t>(i % 5) : INT64_MIN + 1;
    }
  }
  const int64_t want = SortedMedian(v);
  std::vector<int64_t> copy = v;
  CHECK(MedianInPlace(copy) == want);
  std::vector<int64_t> dev = v;
  if (shape == "extremes") return;  // |x - median| overflows int64 there
  const int64_t mad = MadInPlace(dev, want);
  for (int64_t& x : v) x = x >= want ? x - want : want - x;
  CHECK(mad == SortedMedian(v));
}

TEST_CASE("the median from a band: exact where the band holds its ranks, nullopt elsewhere",
          "[robust_stats]") {
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> draw(-50, 50);  // ties at every value
  for (size_t total : {size_t{1}, size_t{2}, size_t{7}, size_t{100}, size_t{101}, size_t{5000}}) {
    std::vector<int64_t> all(total);
    for (int64_t& v : all) v = draw(rng);
    std::vector<int64_t> copy = all;
    const int64_t want = MedianInPlace(copy);
    for (const auto& [lo, hi] : std::vector<std::pair<int64_t, int64_t>>{
             {-50, 50}, {want, want}, {want - 3, want + 1}, {want + 1, 50}, {-50, want - 1}}) {
      std::vector<int64_t> band;
      size_t below = 0;
      for (int64_t v : all) {
        below += v < lo ? 1 : 0;
        if (v >= lo && v <= hi) band.push_back(v);
      }
      INFO("total " << total << " band [" << lo << ", " << hi << "]");
      // Where the band holds both middle ranks it gives MedianInPlace's answer; where it cannot
      // (the median outside it), it never gives a wrong one.
      const std::optional<int64_t> got = MedianOfBand(band, below, total);
      if (lo <= want && want <= hi && (total % 2 == 1 || lo == -50)) CHECK(got.has_value());
      if (got) CHECK(*got == want);
      if (want < lo || want > hi) CHECK_FALSE(got.has_value());
    }
  }
  std::vector<int64_t> none;
  CHECK(MedianOfBand(none, 0, 0) == 0);
}

TEST_CASE("KS distance", "[robust_stats]") {
  std::vector<int64_t> a = {1, 2, 3, 4};
  std::vector<int64_t> same = {1, 2, 3, 4};
  std::vector<int64_t> apart = {10, 11, 12, 13};
  std::vector<int64_t> half = {3, 4, 5, 6};
  CHECK(KsDistanceSorted(a, same) == 0.0);
  CHECK(KsDistanceSorted(a, apart) == 1.0);
  CHECK(KsDistanceSorted(a, half) == Approx(0.5));
  CHECK(KsDistanceSorted(a, {}) == 0.0);
}

TEST_CASE("rolling samples keep the last N", "[robust_stats]") {
  RollingSamples w(3);
  CHECK(w.empty());
  for (int64_t v : {100, 1, 2, 3}) w.Add(v);
  CHECK(w.size() == 3);
  CHECK(w.Median() == 2);  // 100 fell out
  CHECK(w.NoiseScale() == Approx(kMadToSigma * 1.0));
}

}  // namespace
}  // namespace stagefrontier
