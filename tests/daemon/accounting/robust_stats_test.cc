#include "daemon/accounting/robust_stats.h"

#include <catch2/catch.hpp>
#include <cstdint>
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
