// What building the live journal's record blocks costs per rank-step, by zstd level and by how
// many blocks are decoded back to check them (docs/results.md "Coordinator ingest through
// gRPC", issue 33 item 3):
//   bazel run -c opt //tests/bench:record_block_builder_benchmark
// The records are the default ingest shape: each node's batch holds 8 ranks x 4 steps of the
// 6-stage job, then one closed record per step; a block is 100 closed steps.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "daemon/archive/record_block_builder.h"
#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"
#include "tests/bench/bench_workload.h"

namespace stagefrontier {
namespace {

constexpr int kRanksPerNode = 8;
constexpr int kStepsPerBatch = 4;

// `steps` steps of `ranks` ranks as the coordinator journals them.
std::vector<v1::JournalRecord> Journal(int ranks, int steps) {
  std::mt19937_64 rng(20261127);
  std::normal_distribution<double> jitter(0, 50'000);
  std::vector<v1::JournalRecord> out;
  for (int first = 0; first < steps; first += kStepsPerBatch) {
    for (int node = 0; node < ranks / kRanksPerNode; ++node) {
      v1::JournalRecord batch;
      for (int r = 0; r < kRanksPerNode; ++r) {
        wire::PackedStepsEncoder enc(bench::kBenchStages);
        for (int step = first; step < first + kStepsPerBatch; ++step) {
          int64_t d[bench::kBenchStages];
          for (uint32_t k = 0; k < bench::kBenchStages; ++k) {
            d[k] = 2'000'000 * (k + 1) + static_cast<int64_t>(jitter(rng));
          }
          enc.Add(step, d, 0);
        }
        *batch.mutable_ranks()->add_steps() =
            wire::MakeRankSteps("bench", node * kRanksPerNode + r, enc);
      }
      out.push_back(std::move(batch));
    }
    for (int step = first; step < first + kStepsPerBatch; ++step) {
      v1::JournalRecord closed;
      closed.mutable_closed()->set_step(step);
      out.push_back(std::move(closed));
    }
  }
  return out;
}

// Args: zstd level, verify_every (0: none).
void BM_RecordBlocks(benchmark::State& state) {
  constexpr int kRanks = 1024, kSteps = 800;
  const std::vector<v1::JournalRecord> records = Journal(kRanks, kSteps);
  const RecordBlockOptions options{.stage_count = bench::kBenchStages,
                                   .zstd_level = static_cast<int>(state.range(0))};
  uint64_t bytes = 0, verified = 0;
  for (auto _ : state) {
    RecordBlockBuilder builder(options, /*block_steps=*/100, static_cast<uint32_t>(state.range(1)));
    auto emit = [&](v1::JournalRecord block) { bytes += block.block().size(); };
    for (const v1::JournalRecord& r : records) {
      if (!builder.Add(r, emit).ok()) state.SkipWithError("Add failed");
    }
    if (!builder.Finish(emit).ok()) state.SkipWithError("Finish failed");
    verified += builder.verified_blocks();
  }
  const double rank_steps = static_cast<double>(kRanks) * kSteps;
  state.counters["rank_steps_per_s"] = benchmark::Counter(
      rank_steps * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["block_bytes_per_rank_step"] =
      static_cast<double>(bytes) / (rank_steps * static_cast<double>(state.iterations()));
  state.counters["verified_blocks"] =
      static_cast<double>(verified) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_RecordBlocks)
    ->ArgNames({"level", "verify_every"})
    ->Args({3, 0})
    ->Args({3, 1})
    ->Args({3, 8})
    ->Args({1, 0})
    ->Args({1, 1})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stagefrontier
