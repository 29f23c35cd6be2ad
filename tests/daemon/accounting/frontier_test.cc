#include "daemon/accounting/frontier.h"

#include <catch2/catch.hpp>
#include <random>

namespace stagefrontier {
namespace {

TEST_CASE("worked example from docs/accounting.md", "[frontier]") {
  // Three ranks, stages data, forward, sync; each on its own clock (rank 2 is hours ahead).
  StepMatrix m(3, 3);
  const int64_t h = 3'600'000'000'000;
  m.SetMember(0, std::vector<int64_t>{0, 10, 40, 75});
  m.SetMember(1, std::vector<int64_t>{100, 140, 170, 175});  // 30 ns data stall
  m.SetMember(2, std::vector<int64_t>{h, h + 11, h + 43, h + 75});
  StepFrontier f;
  std::vector<int64_t> scratch;
  ComputeFrontier(m, &f, &scratch);
  REQUIRE(f.stages.size() == 3);
  CHECK(f.stages[0].frontier_ns == 40);
  CHECK(f.stages[0].leader == 1);
  CHECK(f.stages[0].increment_ns == 40);
  CHECK(f.stages[0].margin_ns == 29);
  CHECK(f.stages[1].frontier_ns == 70);
  CHECK(f.stages[1].increment_ns == 30);
  CHECK(f.stages[2].frontier_ns == 75);
  CHECK(f.stages[2].increment_ns == 5);
  CHECK(f.exposed_ns == 75);
  // The sync stage: rank 1 arrived last, so it waited least.
  CHECK(f.stages[2].min_member == 1);
  CHECK(f.stages[2].min_duration_ns == 5);
  // The dashboards: mean data = (10 + 40 + 11) / 3, max data = 40.
  CHECK(f.stages[0].mean_duration_ns == 20);
  CHECK(f.stages[0].max_duration_ns == 40);
  // Ties within a tolerance.
  std::vector<int32_t> set;
  LeaderSet(m, 2, f.stages[2].frontier_ns, 0, &set);
  CHECK(set == std::vector<int32_t>{0, 1, 2});
  LeaderSet(m, 0, f.stages[0].frontier_ns, 5, &set);
  CHECK(set == std::vector<int32_t>{1});
}

TEST_CASE("absent members are ignored and an empty step is all zero", "[frontier]") {
  StepMatrix m(4, 2);
  StepFrontier f;
  std::vector<int64_t> scratch;
  ComputeFrontier(m, &f, &scratch);
  CHECK(f.exposed_ns == 0);
  m.SetMember(2, std::vector<int64_t>{5, 7, 20});
  ComputeFrontier(m, &f, &scratch);
  CHECK(f.exposed_ns == 15);
  CHECK(f.stages[0].leader == 2);
  CHECK(f.stages[0].margin_ns == 0);  // one member: no second place
  m.Reset();
  CHECK(m.present_count() == 0);
}

TEST_CASE("exactness: sum of increments equals the largest cumulative time, bit-exactly",
          "[frontier][property]") {
  std::mt19937_64 rng(20261121);
  std::uniform_int_distribution<int> ranks(1, 64);
  std::uniform_int_distribution<int> stages(1, 12);
  std::uniform_int_distribution<int64_t> offset(-INT64_C(1) << 55, INT64_C(1) << 55);
  // Durations up to ~5 hours, with many exact zeros and exact ties.
  std::uniform_int_distribution<int64_t> duration(0, 18'000'000'000'000);
  std::uniform_int_distribution<int> shape(0, 9);
  std::vector<int64_t> scratch;
  for (int trial = 0; trial < 5000; ++trial) {
    const int R = ranks(rng);
    const int S = stages(rng);
    StepMatrix m(R, S);
    std::vector<std::vector<int64_t>> b(R, std::vector<int64_t>(S + 1));
    for (int r = 0; r < R; ++r) {
      b[r][0] = offset(rng);
      for (int k = 1; k <= S; ++k) {
        const int kind = shape(rng);
        const int64_t d = kind == 0 ? 0 : kind == 1 ? 1000 : duration(rng);
        b[r][k] = b[r][k - 1] + d;
      }
      if (shape(rng) != 0) m.SetMember(r, b[r]);  // some ranks absent
    }
    StepFrontier f;
    ComputeFrontier(m, &f, &scratch);
    int64_t sum = 0;
    int64_t max_c = 0;
    bool any = false;
    for (int r = 0; r < R; ++r) {
      if (!m.present(r)) continue;
      max_c = any ? std::max(max_c, b[r][S] - b[r][0]) : b[r][S] - b[r][0];
      any = true;
    }
    for (const StageFrontier& s : f.stages) {
      REQUIRE(s.increment_ns >= 0);
      sum += s.increment_ns;
    }
    REQUIRE(sum == f.exposed_ns);
    REQUIRE(f.exposed_ns == (any ? max_c : 0));
  }
}

}  // namespace
}  // namespace stagefrontier
