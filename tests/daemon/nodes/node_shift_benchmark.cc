// What naming a slow node costs at a window close: NameSlowNode over a 100-step window of
// 16,384 ranks in 2,048 role groups of 8 (the layout benchmark's 8 pipeline stages x tensor
// size 256 x 8 replicas), on nodes of 8 contiguous ranks: every node holds an eighth of 8
// groups, so all 2,048 qualify for the comparison; one of them is slow in fwd. And the
// common case, a data-parallel job on 8-rank nodes, where no node qualifies.
// Run: bazel run -c opt //tests/daemon/nodes:node_shift_benchmark
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "daemon/accounting/group_members.h"
#include "daemon/nodes/node_shift.h"

namespace stagefrontier {
namespace {

constexpr int32_t kPipeline = 8;
constexpr int32_t kTensor = 256;
constexpr int32_t kSteps = 100;

const StageSchema& Schema() {
  static const StageSchema s = *StageSchema::Parse("data:io,fwd:compute,send:p2p,dp_sync:sync");
  return s;
}

std::vector<StepInput> Window(int32_t world, int32_t slow_first, int32_t slow_count) {
  std::mt19937 rng(1);
  std::normal_distribution<double> noise(0, 100'000);
  std::vector<StepInput> steps(kSteps);
  for (int32_t t = 0; t < kSteps; ++t) {
    steps[t].step = t;
    steps[t].ranks.resize(world);
    for (int32_t r = 0; r < world; ++r) {
      const bool slow = r >= slow_first && r < slow_first + slow_count;
      const int64_t fwd = 8'000'000 + static_cast<int64_t>(noise(rng)) + (slow ? 2'000'000 : 0);
      int64_t b = 0;
      steps[t].ranks[r].rank = r;
      steps[t].ranks[r].boundaries_ns = {b, b += 1'000'000, b += fwd, b += 500'000, b += 3'000'000};
    }
  }
  return steps;
}

Verdict Charged(int32_t world) {
  Verdict v;
  v.group = "job";
  v.steps = kSteps;
  v.flagged_steps = kSteps;
  v.exposed_ns = kSteps * 13'000'000LL;
  v.total_excess_ns = kSteps * 2'000'000LL;
  v.label = VerdictLabel::kAmbiguous;
  v.reason = AmbiguityReason::kTie;
  v.excess_cells.push_back(
      {.stage = 1, .rank = world - 1, .excess_ns = v.total_excess_ns, .flagged_steps = kSteps});
  return v;
}

void BM_NameSlowNodeRoleGroups(benchmark::State& state) {
  const int32_t world = 16384;
  RankPlacement p;
  std::vector<std::vector<int32_t>> groups(kPipeline * kTensor);
  const int32_t per_stage = world / kPipeline;
  for (int32_t r = 0; r < world; ++r) {
    p.rank_nodes.push_back("n" + std::to_string(r / 8));
    groups[(r / per_stage) * kTensor + r % kTensor].push_back(r);
  }
  p.group_of_rank = GroupOfRank(groups, world);
  const std::vector<StepInput> steps = Window(world, 800, 8);  // node n100
  std::vector<const StepInput*> window;
  for (const StepInput& s : steps) window.push_back(&s);
  std::string named;
  for (auto _ : state) {
    Verdict v = Charged(world);
    NameSlowNode(Schema(), p, window, NodeShiftThresholds{}, &v);
    named = v.node;
  }
  state.SetLabel("named " + (named.empty() ? std::string("nothing") : named) + ", " +
                 std::to_string(NodesToCompare(p).size()) + " nodes compared");
  state.SetItemsProcessed(state.iterations() * world * kSteps);
}
BENCHMARK(BM_NameSlowNodeRoleGroups)->Unit(benchmark::kMillisecond);

void BM_NameSlowNodeDataParallel(benchmark::State& state) {
  const int32_t world = 16384;
  RankPlacement p;
  for (int32_t r = 0; r < world; ++r) p.rank_nodes.push_back("n" + std::to_string(r / 8));
  const std::vector<StepInput> steps = Window(world, 800, 8);
  std::vector<const StepInput*> window;
  for (const StepInput& s : steps) window.push_back(&s);
  for (auto _ : state) {
    Verdict v = Charged(world);
    NameSlowNode(Schema(), p, window, NodeShiftThresholds{}, &v);
    benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations() * world * kSteps);
}
BENCHMARK(BM_NameSlowNodeDataParallel)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stagefrontier
