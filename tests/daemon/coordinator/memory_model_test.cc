// The memory model behind --max-job-memory-mb and --max-memory-mb (resource_limits.h): the
// estimate must bound the heap a real job grows once its window, its open steps and its query
// history are full; and what the limits refuse is what the model says.
#include <malloc.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "daemon/coordinator/job_state.h"
#include "daemon/coordinator/resource_limits.h"
#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"

namespace stagefrontier {
namespace {

constexpr int kWorld = 512;
constexpr int kStages = 6;

v1::RankDeclaration Decl() {
  v1::RankDeclaration d;
  d.set_job("mem");
  d.set_rank(0);
  d.set_world_size(kWorld);
  for (int k = 0; k < kStages; ++k) {
    v1::Stage* s = d.add_stages();
    s->set_name("s" + std::to_string(k));
    s->set_kind(k == 4 ? v1::STAGE_KIND_SYNC : v1::STAGE_KIND_COMPUTE);
  }
  return d;
}

v1::RankSteps Step(int rank, int64_t step, std::mt19937* rng) {
  wire::PackedStepsEncoder e(kStages);
  int64_t d[kStages];
  for (int64_t& v : d) v = 1'000'000 + static_cast<int64_t>((*rng)() % 100'000);
  e.Add(step, d, 0);
  return wire::MakeRankSteps("mem", rank, e);
}

size_t HeapBytes() { return mallinfo2().uordblks; }

TEST_CASE("the estimate bounds the heap of a job whose window, open steps and history are full") {
  char dir[] = "/tmp/sf_memory_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  JobOptions o;
  o.data_dir = dir;
  o.fsync = false;
  o.engine.window_steps = 100;
  o.history_steps = 2'000;
  o.history_rank_steps = 200'000;
  o.aligner.max_pending_steps = 128;
  o.aligner.deadline_ns = int64_t{1} << 60;  // open steps stay open
  std::mt19937 rng(7);
  const size_t before = HeapBytes();
  auto job = JobState::Create(Decl(), o, nullptr);
  REQUIRE(job.ok());
  // 600 complete steps: the window, the raw history (600 x 512 > 200,000) and summaries fill.
  int64_t step = 0;
  for (; step < 600; ++step) {
    for (int r = 0; r < kWorld; ++r) REQUIRE((*job)->Ingest(Step(r, step, &rng), "n", 1).ok());
    (*job)->CloseDue(1);
  }
  // Then 128 open steps: every rank but one reports them, none can close.
  for (int64_t s = step; s < step + 128; ++s) {
    for (int r = 1; r < kWorld; ++r) REQUIRE((*job)->Ingest(Step(r, s, &rng), "n", 1).ok());
  }
  (*job)->CloseDue(1);
  REQUIRE((*job)->Flush().ok());
  const size_t after = HeapBytes();
  const size_t grown = after > before ? after - before : 0;
  const int64_t estimate = (*job)->reserved_bytes() > 0
                               ? (*job)->reserved_bytes()
                               : EstimateJobBytes(JobShape{.world_size = kWorld,
                                                           .stages = kStages,
                                                           .window_steps = 100,
                                                           .pending_steps = 128,
                                                           .history_steps = 2'000,
                                                           .history_rank_steps = 200'000});
  std::printf(
      "memory model: world %d, %d stages, window 100, 128 open steps: heap grew %.1f MB, "
      "estimate %.1f MB\n",
      kWorld, kStages, grown / 1048576.0, estimate / 1048576.0);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)  // their allocators hide it
  CHECK(static_cast<int64_t>(grown) <= estimate);
  CHECK(static_cast<int64_t>(grown) * 4 >= estimate);  // an upper bound, not a wild one
#endif
}

TEST_CASE("open steps are bounded by rank-steps for large worlds") {
  JobShape big{.world_size = 100'000, .stages = 6, .window_steps = 100, .pending_steps = 41};
  JobShape small{.world_size = 1'024, .stages = 6, .window_steps = 100, .pending_steps = 1'024};
  std::printf("estimates (6 stages, window 100): 1,024 ranks %.0f MB, 100,000 ranks %.0f MB\n",
              EstimateJobBytes(small) / 1048576.0, EstimateJobBytes(big) / 1048576.0);
  CHECK(EstimateJobBytes(big) < (int64_t{8} << 30));  // fits the default --max-job-memory-mb
  MemoryBudget budget(int64_t{1} << 30);
  auto a = budget.Reserve("job a", int64_t{600} << 20);
  REQUIRE(a.ok());
  auto b = budget.Reserve("job b", int64_t{600} << 20);
  REQUIRE(absl::IsResourceExhausted(b.status()));
  CHECK_THAT(std::string(b.status().message()), Catch::Contains("--max-memory-mb"));
  CHECK(a->Resize(int64_t{100} << 20, "job a").ok());
  CHECK(budget.Reserve("job b", int64_t{600} << 20).ok());
}

TEST_CASE("a longer window over Control must fit the job's memory limit") {
  char dir[] = "/tmp/sf_memory_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  JobOptions o;
  o.data_dir = dir;
  o.fsync = false;
  o.limits.max_job_memory_bytes = int64_t{256} << 20;
  MemoryBudget budget(int64_t{1} << 30);
  o.budget = &budget;
  auto job = JobState::Create(Decl(), o, nullptr);
  REQUIRE(job.ok());
  const int64_t reserved = budget.used();
  v1::ConfigChange change;
  change.set_window_steps(50'000);
  absl::Status s = (*job)->ApplyConfig(change);
  CHECK(absl::IsResourceExhausted(s));
  CHECK_THAT(std::string(s.message()), Catch::Contains("--max-job-memory-mb"));
  CHECK(budget.used() == reserved);
  change.set_window_steps(200);
  REQUIRE((*job)->ApplyConfig(change).ok());
  CHECK(budget.used() > reserved);
  job->reset();
  CHECK(budget.used() == 0);
}

}  // namespace
}  // namespace stagefrontier
