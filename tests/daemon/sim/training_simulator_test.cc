#include "daemon/sim/training_simulator.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"

namespace stagefrontier {
namespace {

std::vector<StepInput> Run(const SimConfig& c) {
  absl::StatusOr<TrainingSimulator> sim = TrainingSimulator::Create(c);
  REQUIRE(sim.ok());
  std::vector<StepInput> steps;
  StepInput s;
  while (sim->Next(&s)) steps.push_back(s);
  return steps;
}

TEST_CASE("seeded runs are reproducible", "[sim]") {
  SimConfig c = SimConfig::DataParallel(8);
  c.steps = 20;
  c.seed = 99;
  std::vector<StepInput> a = Run(c);
  std::vector<StepInput> b = Run(c);
  REQUIRE(a.size() == 20);
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t r = 0; r < a[i].ranks.size(); ++r)
      CHECK(a[i].ranks[r].boundaries_ns == b[i].ranks[r].boundaries_ns);
  }
  c.seed = 100;
  CHECK(Run(c)[0].ranks[0].boundaries_ns != a[0].ranks[0].boundaries_ns);
}

TEST_CASE("a sync stage ends together for its group; the last arriver waits least", "[sim]") {
  SimConfig c = SimConfig::DataParallel(4);
  c.steps = 1;
  c.faults.push_back(*ParseFault("slow:data:rank=2:magnitude=40ms"));
  StepInput s = Run(c)[0];
  // Without clock skew every rank's clock reads true time: compare the sync end directly.
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const RankStep& r : s.ranks) {
    lo = std::min(lo, r.boundaries_ns[4]);
    hi = std::max(hi, r.boundaries_ns[4]);
  }
  CHECK(hi - lo < 1'000'000);  // exit jitter only
  const int64_t wait2 = s.ranks[2].boundaries_ns[4] - s.ranks[2].boundaries_ns[3];
  for (int r : {0, 1, 3}) {
    const int64_t wait = s.ranks[r].boundaries_ns[4] - s.ranks[r].boundaries_ns[3];
    CHECK(wait > wait2 + 30'000'000);
  }
}

TEST_CASE("a late exit: the rank leaves the collective late, the group does not wait", "[sim]") {
  SimConfig c = SimConfig::DataParallel(4);
  c.steps = 1;
  c.faults.push_back(*ParseFault("exit:grad_sync:rank=1:magnitude=7ms"));
  StepInput s = Run(c)[0];
  // grad_sync is stage 3: its end is boundary 4, on true time without clock skew.
  const int64_t late = s.ranks[1].boundaries_ns[4];
  for (int r : {0, 2, 3}) {
    CHECK(late - s.ranks[r].boundaries_ns[4] > 6'900'000);
    CHECK(late - s.ranks[r].boundaries_ns[4] < 8'000'000);  // plus exit jitter only
  }
  c.faults = {*ParseFault("exit:forward:rank=1:magnitude=7ms")};
  CHECK_THAT(std::string(TrainingSimulator::Create(c).status().message()),
             Catch::Contains("has no collective"));
}

TEST_CASE("clock skew shifts clocks, not what happens", "[sim]") {
  SimConfig c = SimConfig::DataParallel(4);
  c.steps = 5;
  std::vector<StepInput> plain = Run(c);
  c.clock_skew = true;
  std::vector<StepInput> skewed = Run(c);
  for (size_t i = 0; i < plain.size(); ++i) {
    for (size_t r = 0; r < 4; ++r) {
      const auto& a = plain[i].ranks[r].boundaries_ns;
      const auto& b = skewed[i].ranks[r].boundaries_ns;
      for (size_t k = 1; k < a.size(); ++k) {
        // Durations agree to within 100 ppm (+1 ns rounding).
        const double da = static_cast<double>(a[k] - a[k - 1]);
        const double db = static_cast<double>(b[k] - b[k - 1]);
        CHECK(std::abs(da - db) <= 1e-4 * da + 2);
      }
    }
  }
  CHECK(skewed[0].ranks[1].boundaries_ns[0] != plain[0].ranks[1].boundaries_ns[0]);
}

TEST_CASE("fault patterns and stopped ranks", "[sim]") {
  Fault f = *ParseFault("slow:data:rank=1:magnitude=10ms:every=5:start=10:end=30");
  CHECK(f.MagnitudeAt(9) == 0);
  CHECK(f.MagnitudeAt(10) == 10'000'000);
  CHECK(f.MagnitudeAt(11) == 0);
  CHECK(f.MagnitudeAt(15) == 10'000'000);
  CHECK(f.MagnitudeAt(30) == 0);
  Fault ramp = *ParseFault("slow:data:rank=1:magnitude=10ms:ramp=10");
  CHECK(ramp.MagnitudeAt(4) == 5'000'000);
  CHECK(ramp.MagnitudeAt(50) == 10'000'000);
  SimConfig c = SimConfig::DataParallel(4);
  c.steps = 4;
  c.faults.push_back(*ParseFault("stop:rank=3:start=2"));
  std::vector<StepInput> s = Run(c);
  CHECK(s[1].ranks.size() == 4);
  CHECK(s[2].ranks.size() == 3);
}

TEST_CASE("probe spans lie inside their mixed stage", "[sim]") {
  SimConfig c = SimConfig::MixedBackward(4);
  c.steps = 3;
  c.probe = true;
  c.clock_skew = true;
  for (const StepInput& s : Run(c)) {
    for (const RankStep& r : s.ranks) {
      REQUIRE(r.probe.size() == 1);
      CHECK(r.probe[0].stage == 2);
      CHECK(r.probe[0].enter_ns >= r.boundaries_ns[2]);
      CHECK(r.probe[0].exit_ns <= r.boundaries_ns[3]);
      CHECK(
          ValidateRankStep(
              *StageSchema::Parse("data:io,forward:compute,backward:mixed,optimizer:compute"), 4, r)
              .ok());
    }
  }
}

TEST_CASE("bad fault specs and configurations are rejected clearly", "[sim]") {
  auto error = [](const char* spec) { return std::string(ParseFault(spec).status().message()); };
  CHECK_THAT(error("slow:data:magnitude=5ms"), Catch::Contains("rank=R is required"));
  CHECK_THAT(error("slow:data:rank=1"), Catch::Contains("magnitude=... is required"));
  CHECK_THAT(error("slow:data:rank=1:magnitude=5"), Catch::Contains("not a duration"));
  CHECK_THAT(error("slow:data:rank=x:magnitude=5ms"), Catch::Contains("bad rank \"x\""));
  CHECK_THAT(error("fast:data"), Catch::Contains("must start with"));
  CHECK_THAT(error("slow:data:rank=1:magnitude=5ms:colour=red"),
             Catch::Contains("unknown field \"colour\""));
  CHECK_THAT(error("slow:data:rank=1:magnitude=5ms:every=0"),
             Catch::Contains("every must be >= 1"));
  SimConfig c = SimConfig::DataParallel(4);
  c.faults.push_back(*ParseFault("slow:nope:rank=1:magnitude=5ms"));
  CHECK_THAT(std::string(TrainingSimulator::Create(c).status().message()),
             Catch::Contains("unknown stage \"nope\""));
  c.faults = {*ParseFault("slow:data:rank=9:magnitude=5ms")};
  CHECK_THAT(std::string(TrainingSimulator::Create(c).status().message()),
             Catch::Contains("rank 9"));
  c.faults = {*ParseFault("collective:data:magnitude=5ms")};
  CHECK_THAT(std::string(TrainingSimulator::Create(c).status().message()),
             Catch::Contains("has no collective"));
}

TEST_CASE("a pipeline's layout: P x D ranks, one group per pipeline stage", "[sim]") {
  SimConfig c = SimConfig::Pipeline(3, 2);
  CHECK(c.world_size == 6);
  CHECK(c.pipeline_stages == 3);
  CHECK(c.groups == std::vector<std::vector<int32_t>>{{0, 1}, {2, 3}, {4, 5}});
  absl::StatusOr<TrainingSimulator> sim = TrainingSimulator::Create(c);
  REQUIRE(sim.ok());
  std::string names;
  for (size_t k = 0; k < sim->schema().size(); ++k) {
    absl::StrAppend(&names, k ? "," : "", sim->schema().stage(k).name, ":",
                    StageKindName(sim->schema().stage(k).kind));
  }
  CHECK(names ==
        "data:io,recv_act:p2p,fwd:compute,send_act:p2p,recv_grad:p2p,bwd:compute,"
        "send_grad:p2p,dp_sync:sync,optimizer:compute");
}

TEST_CASE("pipeline timing: transfers wait for their neighbours, dp_sync for the group", "[sim]") {
  SimConfig c = SimConfig::Pipeline(2, 2);
  for (SimStage& st : c.stages) st.noise_cv = 0;
  c.exit_jitter_ns = 1;
  c.steps = 1;  // every rank starts the first step at 0
  c.faults.push_back(*ParseFault("slow:fwd:rank=3:magnitude=5ms"));
  const StepInput s = Run(c)[0];
  REQUIRE(s.ranks.size() == 4);
  auto dur = [&](int32_t r, int k) {
    return s.ranks[r].boundaries_ns[k + 1] - s.ranks[r].boundaries_ns[k];
  };
  auto end = [&](int32_t r, int k) { return s.ranks[r].boundaries_ns[k + 1]; };
  // Stages: 0 data, 1 recv_act, 2 fwd, 3 send_act, 4 recv_grad, 5 bwd, 6 send_grad, 7 dp_sync.
  for (int32_t r : {0, 1}) {
    CHECK(dur(r, 1) == SimConfig::kEmptyP2pNs);      // nothing upstream of stage 0
    CHECK(dur(r, 3) == 300'000);                     // sends its activations
    CHECK(dur(r, 6) == SimConfig::kEmptyP2pNs);      // nothing to send upstream
    CHECK(end(r + 2, 1) == end(r, 3) + 300'000);     // its neighbour receives after the send
    CHECK(dur(r + 2, 3) == SimConfig::kEmptyP2pNs);  // last stage: nothing downstream
    CHECK(dur(r + 2, 4) == SimConfig::kEmptyP2pNs);
    CHECK(end(r, 4) == end(r + 2, 6) + 300'000);  // gradients come back
  }
  CHECK(dur(3, 2) == dur(2, 2) + 5'000'000);  // the slow forward
  // ... reaches rank 1 through the gradients, and both groups' dp_sync.
  CHECK(end(1, 4) - end(0, 4) == 5'000'000);
  CHECK(dur(2, 7) > dur(3, 7) + 4'000'000);
  CHECK(dur(0, 7) > dur(1, 7) + 4'000'000);
  CHECK(std::abs(end(2, 7) - end(3, 7)) < 1'000);
  CHECK(std::abs(end(0, 7) - end(1, 7)) < 1'000);
}

TEST_CASE("pipeline stage_work_scale makes a pipeline stage's fwd and bwd heavier", "[sim]") {
  SimConfig c = SimConfig::Pipeline(2, 1);
  for (SimStage& st : c.stages) st.noise_cv = 0;
  c.stage_work_scale = {1.0, 1.5};
  c.steps = 1;
  const StepInput s = Run(c)[0];
  auto dur = [&](int32_t r, int k) {
    return s.ranks[r].boundaries_ns[k + 1] - s.ranks[r].boundaries_ns[k];
  };
  CHECK(dur(0, 2) == 8'000'000);
  CHECK(dur(1, 2) == 12'000'000);
  CHECK(dur(1, 5) == 18'000'000);
  CHECK(dur(1, 0) == 2'000'000);  // data is not scaled
}

TEST_CASE("pipeline configurations are validated", "[sim]") {
  auto error = [](const SimConfig& c) {
    return std::string(TrainingSimulator::Create(c).status().message());
  };
  SimConfig c = SimConfig::Pipeline(3, 2);
  c.world_size = 8;
  c.groups.clear();
  CHECK_THAT(error(c), Catch::Contains("divide the world size 8"));
  c = SimConfig::Pipeline(3, 2);
  c.stage_work_scale = {1.0, 1.2};
  CHECK_THAT(error(c), Catch::Contains("stage_work_scale has 2 entries"));
  c = SimConfig::Pipeline(3, 2);
  c.stages.erase(c.stages.begin() + 4);  // recv_grad
  CHECK_THAT(error(c), Catch::Contains("\"recv_grad\" is missing"));
  c = SimConfig::Pipeline(3, 2);
  c.stages[3].kind = StageKind::kCompute;  // send_act
  CHECK_THAT(error(c), Catch::Contains("\"send_act\" must be of kind p2p"));
  c = SimConfig::Pipeline(3, 2);
  std::swap(c.stages[2], c.stages[5]);  // bwd before fwd
  CHECK_THAT(error(c), Catch::Contains("out of order"));
  c = SimConfig::Pipeline(3, 2);
  c.stages[0].kind = StageKind::kSync;
  CHECK_THAT(error(c), Catch::Contains("a wait before send_grad"));
  c = SimConfig::DataParallel(4);
  c.stage_work_scale = {1.0};
  CHECK_THAT(error(c), Catch::Contains("needs pipeline_stages"));
}

}  // namespace
}  // namespace stagefrontier
