// What the stall check costs per job and call (every 500 ms) at 1,024 and 16,384 ranks: the
// watch's positions to DecideStall, one rank stuck in compute and the rest waiting in the sync
// stage (the hung case names one rank; the collective case sorts nothing).
// Run: bazel run -c opt //tests/daemon/coordinator:stall_benchmark
#include <benchmark/benchmark.h>

#include <vector>

#include "daemon/coordinator/stall_watch.h"

namespace stagefrontier {
namespace {

void BM_StallCheck(benchmark::State& state) {
  const int world = static_cast<int>(state.range(0));
  const bool hung = state.range(1) != 0;
  static const StageSchema schema =
      *StageSchema::Parse("data:io,forward:compute,backward:compute,grad_sync:sync,opt:compute");
  StallWatch watch(&schema, world, StallOptions{.floor_ns = 1'000'000'000});
  for (int r = 0; r < world; ++r) {
    v1::SlotHealth h;
    h.set_rank(r);
    h.set_owner("alive");
    h.set_open_known(true);
    h.set_open_step(150);
    h.set_open_stage(hung && r == world / 3 ? "forward" : "grad_sync");
    h.set_open_age_ns(2'000'000'000);
    watch.NotePosition(r, h, "node", 1);
  }
  std::vector<RankLiveness> live(static_cast<size_t>(world));
  (void)watch.Check(1, 149, live, false, 0);  // the frontier reached step 149 at t=1
  int64_t now = 10'000'000'000;
  for (auto _ : state) {
    benchmark::DoNotOptimize(watch.Check(now, 149, live, false, now));
    now += 500'000'000;
  }
  state.SetItemsProcessed(state.iterations() * world);
}
BENCHMARK(BM_StallCheck)
    ->Args({1024, 1})
    ->Args({16384, 1})
    ->Args({16384, 0})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace stagefrontier
