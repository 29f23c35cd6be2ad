// Detector health: each condition from exact inputs, a healthy window that holds none, and
// conditions that clear once their cause stops.
#include "daemon/coordinator/detector_health.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace stagefrontier {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int kRanks = 4;

StageSchema Schema() {
  auto s = StageSchema::Create({{"data", StageKind::kIo},
                                {"forward", StageKind::kCompute},
                                {"sync", StageKind::kSync},
                                {"optimizer", StageKind::kCompute}});
  REQUIRE(s.ok());
  return *s;
}

struct StepShape {
  bool sync_absorbs_wait = true;  // the sync stage holds the wait for the slowest rank
  bool optimizer_zero = false;
};

// Rank r's forward takes 5 + r/2 ms: ranks reach the sync stage up to 1.5 ms apart.
StepInput Step(int64_t step, const StepShape& shape, int ranks = kRanks) {
  StepInput in;
  in.step = step;
  const int64_t latest = 2 * kMs + 5 * kMs + (ranks - 1) * kMs / 2;
  for (int r = 0; r < ranks; ++r) {
    RankStep rs;
    rs.rank = r;
    const int64_t arrive = 2 * kMs + 5 * kMs + r * kMs / 2;
    const int64_t sync = shape.sync_absorbs_wait ? 1 * kMs + (latest - arrive) : 1 * kMs;
    const int64_t opt = shape.optimizer_zero ? 300 : 1 * kMs;  // an empty scope: 300 ns
    rs.boundaries_ns = {0, 2 * kMs, arrive, arrive + sync, arrive + sync + opt};
    in.ranks.push_back(rs);
  }
  return in;
}

std::vector<std::string> Names(const std::vector<DetectorCondition>& c) {
  std::vector<std::string> out;
  for (const DetectorCondition& d : c) out.push_back(d.name);
  return out;
}

std::vector<RankRecordCounters> Counters(uint64_t accepted) {
  return std::vector<RankRecordCounters>(kRanks, RankRecordCounters{.accepted = accepted});
}

void Feed(DetectorHealth& h, int steps, const StepShape& shape = {}) {
  for (int i = 0; i < steps; ++i) h.AddStep(Step(i, shape), /*partial=*/false);
}

TEST_CASE("a healthy window holds no condition") {
  DetectorHealth h(Schema());
  Feed(h, 40);
  CHECK(h.CloseWindow(Counters(40), 40).empty());
  CHECK(h.current().empty());
}

TEST_CASE("stage_always_zero names the stage that never lasted") {
  DetectorHealth h(Schema());
  Feed(h, 40, {.optimizer_zero = true});
  const auto& c = h.CloseWindow(Counters(40), 40);
  REQUIRE(Names(c) == std::vector<std::string>{"stage_always_zero"});
  CHECK_THAT(c[0].detail, Catch::Contains("stage(s) optimizer lasted under 10 us"));
  // One step in 40 where it lasted (a descheduled process, say) does not hide it...
  Feed(h, 39, {.optimizer_zero = true});
  h.AddStep(Step(40, {}), false);
  CHECK(Names(h.CloseWindow(Counters(80), 80)) == std::vector<std::string>{"stage_always_zero"});
  // ...a stage that lasts in a few steps of the window (periodic work) clears it.
  Feed(h, 36, {.optimizer_zero = true});
  for (int i = 0; i < 4; ++i) h.AddStep(Step(i, {}), false);
  CHECK(h.CloseWindow(Counters(120), 120).empty());
}

TEST_CASE("sync_never_waits: ranks arrive apart yet the sync stage lasts the same") {
  DetectorHealth h(Schema());
  Feed(h, 40, {.sync_absorbs_wait = false});
  const auto& c = h.CloseWindow(Counters(40), 40);
  REQUIRE(Names(c) == std::vector<std::string>{"sync_never_waits"});
  CHECK_THAT(c[0].detail, Catch::Contains("sync stage sync up to 1.50 ms apart"));
  // Ranks that arrive together cannot tell: not judged.
  DetectorHealth together(Schema());
  for (int i = 0; i < 40; ++i) {
    StepInput in = Step(i, {.sync_absorbs_wait = false}, 1);
    in.ranks.push_back(in.ranks[0]);
    in.ranks[1].rank = 1;
    together.AddStep(in, false);
  }
  CHECK(together.CloseWindow(Counters(40), 40).empty());
}

TEST_CASE("too_few_steps: before the warm-up, or too few complete steps in the window") {
  DetectorHealth h(Schema(), {.warmup_steps = 16});
  Feed(h, 8);
  CHECK(Names(h.CloseWindow(Counters(8), 8)) == std::vector<std::string>{"too_few_steps"});
  for (int i = 0; i < 40; ++i) h.AddStep(Step(i, {}), /*partial=*/i % 5 != 0);  // 8 complete
  const auto& c = h.CloseWindow(Counters(48), 48);
  REQUIRE(Names(c) == std::vector<std::string>{"too_few_steps"});
  CHECK_THAT(c[0].detail, Catch::Contains("8 complete in this window"));
}

TEST_CASE("records_dropped: a rank that lost more than a tenth of its records") {
  DetectorHealth h(Schema());
  Feed(h, 40);
  REQUIRE(h.CloseWindow(Counters(40), 40).empty());
  Feed(h, 40);
  std::vector<RankRecordCounters> now = Counters(80);
  now[2].accepted = 60;
  now[2].dropped = 20;  // 20 of 40 in this window
  now[1].dropped = 2;   // 2 of 42: under the bar
  const auto& c = h.CloseWindow(now, 80);
  REQUIRE(Names(c) == std::vector<std::string>{"records_dropped"});
  CHECK_THAT(c[0].detail, Catch::Contains("rank 2 (20 of 40)"));
  CHECK_THAT(c[0].detail, !Catch::Contains("rank 1"));
}

TEST_CASE("clock_backwards and clock_jump follow the counters' growth, then clear") {
  DetectorHealth h(Schema());
  Feed(h, 40);
  std::vector<RankRecordCounters> now = Counters(40);
  now[1].clock_backwards = 3;
  now[3].clock_ahead = 1;
  const auto& c = h.CloseWindow(now, 40);
  REQUIRE(Names(c) == std::vector<std::string>{"clock_backwards", "clock_jump"});
  CHECK_THAT(c[0].detail, Catch::Contains("rank 1 (3)"));
  CHECK_THAT(c[1].detail, Catch::Contains("rank 3 (1)"));
  Feed(h, 40);
  std::vector<RankRecordCounters> later = Counters(80);
  later[1].clock_backwards = 3;  // no growth: the clock is fine again
  later[3].clock_ahead = 1;
  CHECK(h.CloseWindow(later, 80).empty());
}

// Two groups (pipeline stages) reach the sync stage 3 ms apart by design; inside each group
// the ranks arrive together, or, with `skew_inside`, 1 ms apart with the stage not absorbing it.
StepInput PipelineStep(int64_t step, bool skew_inside) {
  StepInput in;
  in.step = step;
  for (int r = 0; r < kRanks; ++r) {
    RankStep rs;
    rs.rank = r;
    const int64_t arrive = 7 * kMs + (r / 2) * 3 * kMs + (skew_inside ? (r % 2) * kMs : 0);
    rs.boundaries_ns = {0, 2 * kMs, arrive, arrive + kMs, arrive + 2 * kMs};
    in.ranks.push_back(rs);
  }
  return in;
}

TEST_CASE("sync_never_waits is judged inside each sync group") {
  // One group: the pipeline's skew looks like a sync stage that never waits.
  DetectorHealth one(Schema());
  for (int i = 0; i < 40; ++i) one.AddStep(PipelineStep(i, false), false);
  CHECK(Names(one.CloseWindow(Counters(40), 40)) == std::vector<std::string>{"sync_never_waits"});
  // Groups {0, 1} and {2, 3}: inside each the ranks arrive together, nothing to judge.
  DetectorHealth grouped(Schema());
  grouped.set_groups({0, 0, 1, 1});
  for (int i = 0; i < 40; ++i) grouped.AddStep(PipelineStep(i, false), false);
  CHECK(grouped.CloseWindow(Counters(40), 40).empty());
  // A group whose own ranks arrive apart while the stage lasts the same still fires.
  DetectorHealth inside(Schema());
  inside.set_groups({0, 0, 1, 1});
  for (int i = 0; i < 40; ++i) inside.AddStep(PipelineStep(i, true), false);
  const auto& c = inside.CloseWindow(Counters(40), 40);
  REQUIRE(Names(c) == std::vector<std::string>{"sync_never_waits"});
  CHECK_THAT(c[0].detail, Catch::Contains("up to 1.00 ms apart"));
}

TEST_CASE("a sync stage a group's role leaves empty is not a stage that never waits") {
  // Group {2, 3} (the last pipeline stage) sends nothing: its sync stage lasts 0 on both, and
  // they reach it 1 ms apart; group {0, 1} waits in it for each other.
  DetectorHealth h(Schema());
  h.set_groups({0, 0, 1, 1});
  for (int i = 0; i < 40; ++i) {
    StepInput in = PipelineStep(i, /*skew_inside=*/true);
    for (RankStep& r : in.ranks) {
      std::vector<int64_t>& b = r.boundaries_ns;
      const int64_t sync = r.rank < 2 ? kMs + (r.rank == 0 ? kMs : 0) : 0;
      b[3] = b[2] + sync;
      b[4] = b[3] + kMs;
    }
    h.AddStep(in, false);
  }
  CHECK(h.CloseWindow(Counters(40), 40).empty());
}

TEST_CASE("layout_rejected holds while the layout problem is set") {
  DetectorHealth h(Schema());
  h.set_layout_problem("layout not used: ranks 0, 1 declared a layout, ranks 2, 3 none");
  Feed(h, 40);
  const auto& c = h.CloseWindow(Counters(40), 40);
  REQUIRE(Names(c) == std::vector<std::string>{"layout_rejected"});
  CHECK_THAT(c[0].detail, Catch::Contains("ranks 2, 3 none"));
  CHECK_THAT(c[0].detail, Catch::Contains("accounted as one group"));
  h.set_layout_problem("");
  Feed(h, 40);
  CHECK(h.CloseWindow(Counters(80), 80).empty());
}

}  // namespace
}  // namespace stagefrontier
