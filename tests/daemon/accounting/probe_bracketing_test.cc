// Bracketing validation: honest marks give no violation; marks that run ahead of the
// collectives, or collectives issued where none belongs, are counted on the right stage and
// rank with their size and a plain explanation.
#include "daemon/accounting/probe_bracketing.h"

#include <catch2/catch.hpp>

#include "daemon/accounting/engine.h"
#include "daemon/sim/training_simulator.h"

namespace stagefrontier {
namespace {

StageSchema Ddp() {
  return *StageSchema::Parse(
      "data:io,forward:compute,backward:compute,grad_sync:sync,optimizer:compute");
}

ProbeSpan Span(uint32_t stage, int64_t enter, int64_t exit, uint16_t op = 0) {
  ProbeSpan s;
  s.stage = stage;
  s.enter_ns = enter;
  s.exit_ns = exit;
  s.call_ns = enter;
  s.op = op;
  return s;
}

TEST_CASE("bracketing rules: defaults, explicit rules, and clear errors") {
  auto b = ProbeBracketing::Create(Ddp(), 4, "");
  REQUIRE(b.ok());
  CHECK(b->DescribeRules() == "*:grad_sync");
  auto custom =
      ProbeBracketing::Create(Ddp(), 4, "all_reduce:grad_sync|backward, all_gather:forward");
  REQUIRE(custom.ok());
  CHECK(custom->DescribeRules() ==
        "all_reduce:backward|grad_sync, all_gather:forward, *:grad_sync");
  CHECK_THAT(
      std::string(ProbeBracketing::Create(Ddp(), 4, "allreduce:grad_sync").status().message()),
      Catch::Contains("unknown operation \"allreduce\""));
  CHECK_THAT(std::string(ProbeBracketing::Create(Ddp(), 4, "all_reduce:sync").status().message()),
             Catch::Contains("the schema has no stage \"sync\""));
  CHECK_THAT(std::string(ProbeBracketing::Create(Ddp(), 4, "all_reduce").status().message()),
             Catch::Contains("is not op:stage|stage"));
  // Rules reach the engine: a bad rule refuses the job config.
  JobConfig job{Ddp(), 4, {}, {}, false, {}, "all_reduce:nowhere", {}};
  CHECK_FALSE(Engine::Create(job).ok());
}

TEST_CASE("honest marks: every simulated collective lies in its stage, no violation") {
  SimConfig c = SimConfig::DataParallel(8);
  c.steps = 120;
  c.probe = true;
  absl::StatusOr<TrainingSimulator> sim = TrainingSimulator::Create(c);
  REQUIRE(sim.ok());
  JobConfig job{sim->schema(), 8, {}, {}, false, {}, "", {}};
  auto engine = *Engine::Create(job);
  StepInput in;
  while (sim->Next(&in)) REQUIRE(engine->AddStep(in).ok());
  CHECK(engine->bracketing().checked() == 120 * 8);
  CHECK(engine->bracketing().violations() == 0);
  for (const BracketFinding& f : engine->bracketing().Findings()) CHECK(f.explanation.empty());
}

TEST_CASE("marks that run ahead of the collective: counted on that stage and rank, with size") {
  SimConfig c = SimConfig::DataParallel(8);
  c.steps = 60;
  c.probe = true;
  TrainingSimulator sim = *TrainingSimulator::Create(c);
  auto engine = *Engine::Create(JobConfig{sim.schema(), 8, {}, {}, false, {}, "", {}});
  StepInput in;
  while (sim.Next(&in)) {
    // Rank 5 marks grad_sync finished 3 ms before its all-reduce completes.
    for (RankStep& r : in.ranks) {
      if (r.rank != 5) continue;
      for (ProbeSpan& s : r.probe) {
        if (s.stage == 3) s.exit_ns = r.boundaries_ns[4] + 3'000'000;
      }
    }
    REQUIRE(engine->AddStep(in).ok());
  }
  const ProbeBracketing& b = engine->bracketing();
  CHECK(b.violations() == 60);
  std::vector<BracketFinding> findings = b.Findings();
  REQUIRE_FALSE(findings.empty());
  const BracketFinding& f = findings[0];
  CHECK(f.rank == 5);
  CHECK(f.stage == 3);
  CHECK(f.violations == 60);
  CHECK(f.checked == 60);
  CHECK(f.max_overrun_ns == 3'000'000);
  CHECK(f.last_violation_step == 59);
  CHECK_FALSE(f.stage_not_allowed);
  CHECK_THAT(f.explanation, Catch::Contains("the stage marks run ahead of the GPU"));
  CHECK_THAT(f.explanation, Catch::Contains("synchronize the stream before marking"));
  CHECK(findings[1].violations == 0);  // every other rank is honest
}

TEST_CASE("a collective issued in a stage where none belongs is its own finding") {
  auto b = *ProbeBracketing::Create(Ddp(), 2, "");
  RankStep r;
  r.rank = 1;
  constexpr int64_t ms = 1'000'000;
  r.boundaries_ns = {0, 10 * ms, 20 * ms, 30 * ms, 40 * ms, 50 * ms};
  r.probe.push_back(Span(1, 12 * ms, 18 * ms));  // all_reduce inside forward
  r.probe.push_back(Span(3, 31 * ms, 39 * ms));  // and one where it belongs
  b.Check(7, r);
  CHECK(b.checked() == 2);
  CHECK(b.violations() == 1);
  std::vector<BracketFinding> f = b.Findings();
  REQUIRE(f.size() == 2);
  CHECK(f[0].stage == 1);
  CHECK(f[0].stage_not_allowed);
  CHECK_THAT(f[0].explanation, Catch::Contains("lie in no stage allowed for them (*:grad_sync)"));
  // Within the tolerance is not a violation (clock conversion error).
  RankStep close = r;
  close.probe = {Span(3, 30 * ms, 40 * ms + ProbeBracketing::kDefaultToleranceNs)};
  CHECK(b.Bracketed(close, close.probe[0]));
  close.probe[0].exit_ns += 1;
  CHECK_FALSE(b.Bracketed(close, close.probe[0]));
}

}  // namespace
}  // namespace stagefrontier
