// What a declared 3D-parallel layout costs the coordinator at 16,384 ranks in 2,048 groups
// (8 pipeline stages x tensor size 256 x 8 replicas): every rank's declaration into a job
// (the groups are built once, at the last one), and GroupsFromLayout itself.
// Run: bazel run -c opt //tests/daemon/coordinator:layout_benchmark
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "daemon/coordinator/job_layout.h"
#include "daemon/coordinator/job_state.h"

namespace stagefrontier {
namespace {

constexpr int32_t kPipeline = 8;

v1::RankDeclaration Declaration(int32_t rank, int32_t world, int32_t tensor) {
  v1::RankDeclaration d;
  d.set_job("layout-bench");
  d.set_rank(rank);
  d.set_world_size(world);
  d.set_owner_generation(1);
  for (const char* s : {"data", "fwd", "send", "dp_sync"}) {
    v1::Stage* st = d.add_stages();
    st->set_name(s);
    st->set_kind(std::string(s) == "send"      ? v1::STAGE_KIND_P2P
                 : std::string(s) == "dp_sync" ? v1::STAGE_KIND_SYNC
                                               : v1::STAGE_KIND_COMPUTE);
  }
  const int32_t per_stage = world / kPipeline;
  d.mutable_layout()->set_pipeline_stage(rank / per_stage);
  d.mutable_layout()->set_pipeline_stages(kPipeline);
  d.mutable_layout()->set_tensor_rank(rank % tensor);
  d.mutable_layout()->set_tensor_size(tensor);
  return d;
}

// Every rank declares into a fresh job: the groups are computed once, at the last declaration.
void BM_DeclareLayouts(benchmark::State& state) {
  const int32_t world = static_cast<int32_t>(state.range(0));
  const int32_t tensor = static_cast<int32_t>(state.range(1));
  std::vector<v1::RankDeclaration> decls;
  for (int32_t r = 0; r < world; ++r) decls.push_back(Declaration(r, world, tensor));
  for (auto _ : state) {
    state.PauseTiming();
    char dir[] = "/tmp/sf_layout_bench_XXXXXX";
    if (mkdtemp(dir) == nullptr) state.SkipWithError("mkdtemp");
    JobOptions o;
    o.data_dir = dir;
    o.fsync = false;
    o.limits.max_world_size = world;
    auto job = JobState::Create(decls[0], o, nullptr);
    if (!job.ok()) state.SkipWithError(std::string(job.status().message()).c_str());
    state.ResumeTiming();
    for (const v1::RankDeclaration& d : decls) (*job)->NoteOwner(d, "node");
    state.PauseTiming();
    v1::GetHealthReply h;
    (*job)->Health(&h);
    if (h.sync_groups_size() != kPipeline * tensor) state.SkipWithError("groups not built");
    job->reset();
    std::filesystem::remove_all(dir);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * world);
}
BENCHMARK(BM_DeclareLayouts)->Args({16384, 256})->Args({1024, 16})->Unit(benchmark::kMillisecond);

void BM_GroupsFromLayout(benchmark::State& state) {
  const int32_t world = static_cast<int32_t>(state.range(0));
  const int32_t tensor = static_cast<int32_t>(state.range(1));
  std::vector<DeclaredLayout> by_rank;
  const int32_t per_stage = world / kPipeline;
  for (int32_t r = 0; r < world; ++r) {
    by_rank.push_back(DeclaredLayout::Of(kPipeline, r / per_stage, r % tensor, tensor));
  }
  for (auto _ : state) benchmark::DoNotOptimize(GroupsFromLayout(by_rank));
  state.SetItemsProcessed(state.iterations() * world);
}
BENCHMARK(BM_GroupsFromLayout)->Args({16384, 256})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stagefrontier
