#include "daemon/accounting/engine.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <limits>

#include "daemon/accounting/group_accountant.h"

namespace stagefrontier {
namespace {

JobConfig Job(int32_t world) {
  return JobConfig{
      *StageSchema::Parse("data:io,compute:compute,sync:sync"), world, {}, {}, false, {}, "", {}};
}

RankStep Rank(int32_t r, std::vector<int64_t> b) { return RankStep{r, std::move(b), {}}; }

TEST_CASE("bad records reject the step with a specific error", "[engine]") {
  auto engine = *Engine::Create(Job(2));
  auto message = [&](StepInput in) { return std::string(engine->AddStep(in).message()); };
  CHECK_THAT(message({1, {Rank(5, {0, 1, 2, 3})}}), Catch::Contains("rank 5 is outside [0, 2)"));
  CHECK_THAT(message({1, {Rank(0, {0, 1, 2})}}),
             Catch::Contains("reported 3 boundaries; the schema needs 4"));
  CHECK_THAT(message({1, {Rank(0, {0, 5, 2, 3})}}),
             Catch::Contains("stage \"compute\" has a negative duration (-3 ns)"));
  CHECK_THAT(message({1, {Rank(0, {0, 1, 2, 3}), Rank(0, {0, 1, 2, 3})}}),
             Catch::Contains("rank 0 reported twice"));
  CHECK(engine->counters().rejected_steps == 4);
  CHECK(engine->LastStep() == nullptr);
  REQUIRE(engine->AddStep({7, {Rank(0, {0, 1, 2, 3}), Rank(1, {0, 1, 2, 3})}}).ok());
  absl::Status dup = engine->AddStep({7, {Rank(0, {0, 1, 2, 3})}});
  CHECK(dup.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(dup.message()),
             Catch::Contains("step 7 is not after the last accounted step 7"));
  CHECK(engine->counters().steps_accounted == 1);
}

TEST_CASE("a reversed probe span is rejected; one outside its stage is a bracketing violation",
          "[engine]") {
  auto engine = *Engine::Create(Job(1));
  RankStep r = Rank(0, {0, 10, 20, 30});
  ProbeSpan reversed;
  reversed.stage = 2;
  reversed.enter_ns = 25;
  reversed.exit_ns = 22;
  r.probe.push_back(reversed);
  CHECK_THAT(std::string(engine->AddStep({1, {r}}).message()), Catch::Contains("is reversed"));
  r.probe[0].enter_ns = 22;
  r.probe[0].exit_ns = 35'000'000;  // 35 ms past the end of "sync"
  REQUIRE(engine->AddStep({2, {r}}).ok());
  CHECK(engine->bracketing().checked() == 1);
  CHECK(engine->bracketing().violations() == 1);
}

TEST_CASE("the window keeps the probe's waits only for steps where the probe saw a span",
          "[engine]") {
  const StageSchema schema = *StageSchema::Parse("data:io,compute:compute,sync:sync");
  GroupAccountant group("job", schema, {0, 1}, EngineConfig{});
  const auto step = [&](int64_t n, int probed_rank) {
    RankStep r0 = Rank(0, {0, 10, 20, 30});
    RankStep r1 = Rank(1, {0, 12, 22, 30});
    RankStep& probed = probed_rank == 0 ? r0 : r1;
    if (probed_rank >= 0) {
      probed.probe.push_back(ProbeSpan{.stage = 2, .enter_ns = 23, .exit_ns = 29});
    }
    const RankStep* by_member[] = {&r0, &r1};
    group.Account(n, by_member);
  };
  step(1, 0);   // rank 0 waited 6 ns at its last collective of "sync"
  step(2, -1);  // the probe saw nothing
  step(3, 1);
  const AccountingWindow& w = group.window();
  REQUIRE(w.size() == 3);
  CHECK(w.probe_wait(0, 0, 2) == 6);
  CHECK(w.probe_wait(0, 1, 2) == -1);
  CHECK(w.probe_wait(0, 0, 1) == -1);
  // Nothing is kept for a step without a span, and no earlier step's wait shows through.
  CHECK(w.at(1).probe_wait.empty());
  CHECK(w.probe_wait(1, 0, 2) == -1);
  CHECK(w.probe_wait(2, 0, 2) == -1);
  CHECK(w.probe_wait(2, 1, 2) == 6);
}

TEST_CASE("absent ranks make a partial step accounted over the present ones", "[engine]") {
  auto engine = *Engine::Create(Job(3));
  REQUIRE(engine->AddStep({1, {Rank(0, {0, 10, 20, 30}), Rank(2, {50, 70, 80, 85})}}).ok());
  const StepAccounting* acc = engine->LastStep();
  REQUIRE(acc != nullptr);
  CHECK(acc->partial);
  CHECK(acc->missing_ranks == std::vector<int32_t>{1});
  CHECK(acc->exposed_ns == 35);
  CHECK(acc->stages[0].leader == 2);
  // Lag behind the frontier at each boundary: rank 0 is 10 ns behind after data.
  CHECK(acc->lag_ns[0 * 3 + 0] == 10);
  CHECK(acc->lag_ns[1 * 3 + 0] == -1);  // absent
  CHECK(acc->lag_ns[2 * 3 + 2] == 0);
  CHECK(engine->counters().partial_steps == 1);
}

TEST_CASE("job and group configuration errors", "[engine]") {
  JobConfig bad = Job(0);
  CHECK_THAT(std::string(Engine::Create(bad).status().message()), Catch::Contains("world size 0"));
  JobConfig overlap = Job(4);
  overlap.groups = {{0, 1}, {1, 2, 3}};
  CHECK_THAT(std::string(Engine::Create(overlap).status().message()),
             Catch::Contains("rank 1 belongs to more than one sync group"));
  JobConfig missing = Job(4);
  missing.groups = {{0, 1}, {2}};
  CHECK_THAT(std::string(Engine::Create(missing).status().message()),
             Catch::Contains("rank 3 is in no sync group"));
  JobConfig knobs = Job(4);
  knobs.engine.window_steps = 1;
  CHECK_THAT(std::string(Engine::Create(knobs).status().message()),
             Catch::Contains("window_steps = 1"));
}

TEST_CASE("closed windows produce one verdict per window and group", "[engine]") {
  JobConfig job = Job(4);
  job.groups = {{0, 1}, {2, 3}};
  job.engine.window_steps = 10;
  auto engine = *Engine::Create(job);
  for (int64_t s = 0; s < 25; ++s) {
    StepInput in{s, {}};
    for (int32_t r = 0; r < 4; ++r) in.ranks.push_back(Rank(r, {0, 100, 200, 300}));
    REQUIRE(engine->AddStep(in).ok());
  }
  std::vector<Verdict> v = engine->TakeClosedVerdicts();
  REQUIRE(v.size() == 6);  // 2 windows x (job + 2 groups)
  CHECK(v[0].group == "job");
  CHECK(v[1].group == "group0");
  CHECK(v[0].first_step == 0);
  CHECK(v[0].last_step == 9);
  CHECK(v[0].label == VerdictLabel::kHealthy);
  CHECK(engine->TakeClosedVerdicts().empty());
  CHECK(engine->Report().groups.size() == 2);
}

// A pipeline of 2 stages x 2 replicas: ranks 0, 1 (stage 0) load data for 2 ms and run fwd for
// 4 ms; ranks 2, 3 (stage 1) load for 0.2 ms and run fwd for 6 ms; each stage's replicas meet in
// dp_sync. A little deterministic jitter; `slow_fwd` ms more on rank `slow_rank` from step 20.
StepInput PipelineStep(int64_t step, int32_t slow_rank = -1, int64_t slow_ns = 0) {
  constexpr int64_t kMs = 1'000'000;
  StepInput in{step, {}};
  int64_t arrive[4];
  int64_t data[4], fwd[4];
  for (int32_t r = 0; r < 4; ++r) {
    const int64_t jitter = ((step * 7919 + r * 104729) % 97) * 1000;  // 0..96 us
    data[r] = (r < 2 ? 2 * kMs : kMs / 5) + jitter;
    fwd[r] = (r < 2 ? 4 * kMs : 6 * kMs) + jitter / 2;
    if (r == slow_rank && step >= 20) fwd[r] += slow_ns;
    arrive[r] = data[r] + fwd[r];
  }
  for (int32_t r = 0; r < 4; ++r) {
    const int32_t peer = r ^ 1;  // the other replica of the same pipeline stage
    const int64_t end = std::max(arrive[r], arrive[peer]) + kMs / 2;
    in.ranks.push_back(Rank(r, {0, data[r], arrive[r], end}));
  }
  return in;
}

JobConfig Pipeline(bool roles) {
  JobConfig job{
      *StageSchema::Parse("data:io,fwd:compute,dp_sync:sync"), 4, {}, {}, false, {}, "", {}};
  if (roles) {
    job.groups = {{0, 1}, {2, 3}};
    job.group_names = {"pp0", "pp1"};
    job.groups_are_roles = true;
  }
  job.engine.window_steps = 20;
  return job;
}

TEST_CASE("groups that are roles: a pipeline's stages are never compared with each other",
          "[engine]") {
  auto engine = *Engine::Create(Pipeline(/*roles=*/true));
  auto one_group = *Engine::Create(Pipeline(/*roles=*/false));
  for (int64_t s = 0; s < 60; ++s) {
    REQUIRE(engine->AddStep(PipelineStep(s)).ok());
    REQUIRE(one_group->AddStep(PipelineStep(s)).ok());
  }
  const std::vector<Verdict> v = engine->TakeClosedVerdicts();
  REQUIRE(v.size() == 9);  // 3 windows x (job + 2 groups)
  CHECK(v[0].group == "job");
  CHECK(v[1].group == "pp0");
  CHECK(v[2].group == "pp1");
  for (const Verdict& w : v) {
    INFO(w.group << " " << w.first_step << ": " << w.explanation);
    CHECK(w.label == VerdictLabel::kHealthy);
  }
  CHECK(engine->Report().job.verdict.label == VerdictLabel::kHealthy);
  CHECK(engine->CurrentVerdict().label == VerdictLabel::kHealthy);
  // What one group makes of the same steps (the comparison across stages that roles avoid).
  std::printf("one group reads the healthy pipeline as %s\n",
              LabelText(one_group->Report().job.verdict).c_str());
}

TEST_CASE("groups that are roles: a slow rank is named through its group", "[engine]") {
  auto engine = *Engine::Create(Pipeline(/*roles=*/true));
  for (int64_t s = 0; s < 60; ++s) {
    REQUIRE(engine->AddStep(PipelineStep(s, /*slow_rank=*/3, 3'000'000)).ok());
  }
  const Verdict job = engine->Report().job.verdict;
  INFO(job.explanation);
  CHECK(job.group == "job");
  CHECK(job.label == VerdictLabel::kClear);
  CHECK(job.sync_group == "pp1");
  REQUIRE_FALSE(job.suspects.empty());
  CHECK(job.suspects[0].stage == 1);
  CHECK(job.suspects[0].rank == 3);
  // Regression: a group of two took the fault's own gap as its noise scale and tied the slow
  // rank with its peer (real 2 x 2 pipeline run: fwd on ranks 2 and 3 charged alike).
  CHECK(job.candidate_ranks == std::vector<int32_t>{3});
  CHECK(job.suspects.size() == 1);
  CHECK_THAT(job.explanation, Catch::StartsWith("Sync group pp1: "));
  // The closed window's job verdict is the same composition.
  std::vector<Verdict> closed = engine->TakeClosedVerdicts();
  REQUIRE(closed.size() == 9);
  CHECK(closed[6].sync_group == "pp1");
  CHECK(closed[6].label == VerdictLabel::kClear);
  CHECK(closed[7].label == VerdictLabel::kHealthy);  // pp0
}

TEST_CASE("group names must match the groups", "[engine]") {
  JobConfig job = Pipeline(true);
  job.group_names = {"pp0"};
  CHECK_THAT(std::string(Engine::Create(job).status().message()),
             Catch::Contains("1 group names for 2 sync groups"));
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

// Regression (hostile input): thresholds of inf or 1e308 were accepted over Control and
// silently turned the detector off.
TEST_CASE("thresholds must be finite and in range", "[engine]") {
  const auto refused = [](auto set) {
    EngineConfig c;
    set(c);
    return !c.Validate().ok();
  };
  CHECK(refused([](EngineConfig& c) { c.excess_z = std::numeric_limits<double>::infinity(); }));
  CHECK(refused([](EngineConfig& c) { c.excess_z = 1e308; }));
  CHECK(refused([](EngineConfig& c) { c.tie_z = std::nan(""); }));
  CHECK(refused([](EngineConfig& c) { c.clear_share = std::numeric_limits<double>::infinity(); }));
  CHECK(refused([](EngineConfig& c) { c.noise_floor_ns = int64_t{1} << 62; }));
  CHECK(refused([](EngineConfig& c) { c.group_spread_z = -1; }));
  CHECK(refused([](EngineConfig& c) { c.group_spread_z = std::nan(""); }));
  CHECK_FALSE(refused([](EngineConfig& c) { c.excess_z = 6; }));
  EngineConfig c;
  c.excess_z = 1e308;
  CHECK_THAT(std::string(c.Validate().message()), Catch::Contains("excess_z"));
}

}  // namespace
}  // namespace stagefrontier
