// The usage examples of the main headers' banners, as code: each block between "example"
// comments is the header's example, with only its "..." filled in. When an example stops
// compiling or stops being true, this test fails; fix the header's banner with it.
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/accounting/engine.h"
#include "daemon/accounting/frontier.h"
#include "daemon/accounting/group_accountant.h"
#include "shm/stage_schema.h"

namespace stagefrontier {
namespace {

// b[0..5] of a five-stage step starting at `start_ns`, each stage `stage_ns` long.
std::vector<int64_t> Boundaries(int64_t start_ns, int64_t stage_ns) {
  std::vector<int64_t> b(6);
  for (size_t k = 0; k < b.size(); ++k) b[k] = start_ns + static_cast<int64_t>(k) * stage_ns;
  return b;
}

RankStep Record(int32_t rank, int64_t start_ns, int64_t stage_ns) {
  return RankStep{.rank = rank, .boundaries_ns = Boundaries(start_ns, stage_ns), .probe = {}};
}

TEST_CASE("frontier.h banner example") {
  const std::vector<int64_t> boundaries_of_rank0 = Boundaries(1'000, 10);
  // --- example (daemon/accounting/frontier.h) ---
  StepMatrix m(/*members=*/4, /*stages=*/5);
  m.SetMember(0, boundaries_of_rank0);  // b[0..S] on rank 0's own clock
  // ...
  m.SetMember(1, Boundaries(-7'000'000'000'000, 12));  // an unrelated clock
  m.SetMember(2, Boundaries(5, 9));
  m.SetMember(3, Boundaries(0, 10));
  StepFrontier f;
  std::vector<int64_t> scratch;
  ComputeFrontier(m, &f, &scratch);
  // f.exposed_ns == sum of f.stages[k].increment_ns, exactly.
  // --- end of example ---
  int64_t sum = 0;
  for (const StageFrontier& s : f.stages) sum += s.increment_ns;
  CHECK(f.exposed_ns == sum);
  CHECK(f.exposed_ns == 60);  // rank 1's 5 x 12 ns
}

TEST_CASE("engine.h banner example") {
  StepInput step_input;
  for (int32_t r = 0; r < 16; ++r) step_input.ranks.push_back(Record(r, r * 1'000'000, 1'000));
  std::vector<Verdict> published;
  auto publish = [&](const Verdict& v) { published.push_back(v); };
  // --- example (daemon/accounting/engine.h) ---
  // clang-format off
  JobConfig job{.schema = *StageSchema::Parse("data:io,forward:compute,backward:compute,"
                                              "grad_sync:sync,optimizer:compute"),
                .world_size = 16,
                .groups = {},  // one sync group: the whole job
                .group_names = {},
                .groups_are_roles = false,
                .engine = EngineConfig{},
                .probe_bracket_rules = "",
                .group_pipeline_stages = {}};
  // clang-format on
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(job);
  absl::Status s = (*engine)->AddStep(step_input);  // InvalidArgument on bad records
  JobReport report = (*engine)->Report();
  for (const Verdict& v : (*engine)->TakeClosedVerdicts()) publish(v);
  // --- end of example ---
  REQUIRE(engine.ok());
  CHECK(s.ok());
  CHECK(published.empty());  // one step closes no window
  (void)report;
}

TEST_CASE("step_input.h banner example") {
  const StageSchema schema = *StageSchema::Parse(
      "data:io,forward:compute,backward:compute,grad_sync:sync,optimizer:compute");
  const int64_t t0 = 100, t1 = 110, t2 = 120, t3 = 130, t4 = 140, t5 = 150;
  // --- example (daemon/accounting/step_input.h) ---
  StepInput in;
  in.step = 42;
  RankStep r{.rank = 3, .boundaries_ns = {t0, t1, t2, t3, t4, t5}, .probe = {}};
  in.ranks.push_back(r);
  absl::Status s = ValidateRankStep(schema, /*world_size=*/16, in.ranks[0]);
  // --- end of example ---
  CHECK(s.ok());
}

TEST_CASE("group_accountant.h banner example") {
  const StageSchema schema = *StageSchema::Parse(
      "data:io,forward:compute,backward:compute,grad_sync:sync,optimizer:compute");
  const RankStep r0 = Record(0, 0, 100), r1 = Record(1, 50, 100), r3 = Record(3, 9, 100);
  // --- example (daemon/accounting/group_accountant.h) ---
  GroupAccountant g("job", schema, /*ranks=*/{0, 1, 2, 3}, EngineConfig{});
  std::vector<const RankStep*> by_member = {&r0, &r1, nullptr, &r3};  // rank 2 absent
  const StepAccounting& acc = g.Account(/*step=*/17, by_member);
  Verdict v = g.DecideVerdict();
  // --- end of example ---
  CHECK(acc.step == 17);
  CHECK(v.label == VerdictLabel::kHealthy);
}

}  // namespace
}  // namespace stagefrontier
