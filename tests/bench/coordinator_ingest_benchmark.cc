// Coordinator ingest on one core: the path a sidecar batch takes after the gRPC layer
// (decode the packed vectors, journal them, align across ranks, close the step, account it
// in the engine, keep the summary). One RankSteps message per rank and step, flushed to the
// journal and closing what is due every 8 rank-steps (one node's batch), as the coordinator
// does for each batch of a sidecar on an 8-GPU node at 1 step/s.
// Goal (docs/results.md): >= 1,000,000 rank-steps/s. Also reports wire bytes per rank-step.
//   bazel run -c opt //tests/bench:coordinator_ingest_benchmark
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "daemon/captures/capture_trigger.h"
#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/coordinator/job_state.h"
#include "daemon/nodes/node_ledger.h"
#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"
#include "tests/bench/bench_workload.h"

namespace stagefrontier {
namespace {

constexpr uint32_t kStages = bench::kBenchStages;

// `variants` messages per rank, each of `steps` steps from 0 (varied durations; rank 7 slow in
// data), message v of rank r at [v * world + r].
std::vector<v1::RankSteps> EncodeMessages(int world, int variants, int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> jitter(-200'000, 200'000);
  std::vector<v1::RankSteps> msgs(static_cast<size_t>(world) * variants);
  for (int v = 0; v < variants; ++v) {
    for (int r = 0; r < world; ++r) {
      wire::PackedStepsEncoder e(kStages);
      for (int i = 0; i < steps; ++i) {
        int64_t d[kStages] = {4'000'000 + jitter(rng),  8'000'000 + jitter(rng),
                              12'000'000 + jitter(rng), 300'000 + jitter(rng) / 10,
                              3'000'000 + jitter(rng),  100'000};
        if (r == 7) d[0] += 5'000'000;
        e.Add(i, d, 0);
      }
      msgs[static_cast<size_t>(v) * world + r] = wire::MakeRankSteps("bench", r, e);
    }
  }
  return msgs;
}

// Every rank's message `msgs[first + r]`, rebased at `base_step`, into `job`, closing what is
// due and flushing after each 8 ranks (one node's batch, as an ingest stream does: the cost
// per batch must not grow with the world size, 12,500 batches per step at 100,000 ranks) and
// at the end.
void IngestRound(JobState& job, std::vector<v1::RankSteps>& msgs, size_t first, int world,
                 int64_t base_step, int64_t now, const std::vector<std::string>* nodes = nullptr) {
  for (int r = 0; r < world; ++r) {
    v1::RankSteps& m = msgs[first + r];
    m.set_base_step(base_step);
    benchmark::DoNotOptimize(job.Ingest(m, nodes == nullptr ? "n" : (*nodes)[r / 8], now));
    if ((r & 7) == 7) {
      job.CloseDue(now);
      (void)job.Flush();
    }
  }
  job.CloseDue(now);
  (void)job.Flush();
}

// A fresh journal directory under /dev/shm for one run ("" if it cannot be made), and the
// job's options there: no fsync, `history_rank_steps` raw rank-steps kept.
std::string MakeBenchDir() {
  char dir[] = "/dev/shm/sf_bench_XXXXXX";
  return mkdtemp(dir) == nullptr ? std::string() : std::string(dir);
}
JobOptions BenchJobOptions(const std::string& dir, int64_t history_rank_steps) {
  JobOptions o;
  o.data_dir = dir;
  o.fsync = false;
  o.history_rank_steps = history_rank_steps;
  return o;
}
void RemoveBenchDir(benchmark::State& state, const std::string& dir) {
  const std::string cmd = "rm -rf " + dir;
  if (std::system(cmd.c_str()) != 0) state.SkipWithError("cleanup");
}

void BM_CoordinatorIngest(benchmark::State& state) {
  const int world = static_cast<int>(state.range(0));
  const std::string dir = MakeBenchDir();
  if (dir.empty()) {
    state.SkipWithError("mkdtemp");
    return;
  }
  // No raw window kept: measure the accounting path.
  const JobOptions o = BenchJobOptions(dir, /*history_rank_steps=*/0);
  // Pre-encode 64 steps' messages per rank (varied durations; rank 7 slow in data).
  constexpr int kVariants = 64;
  std::vector<v1::RankSteps> msgs = EncodeMessages(world, kVariants, /*steps=*/1, /*seed=*/3);
  size_t wire_bytes = 0;
  for (const v1::RankSteps& m : msgs) wire_bytes += m.ByteSizeLong();
  // Heap held by the job (aligner, engine window, step history), per rank, after the run.
  const size_t heap_before = mallinfo2().uordblks;
  CoordinatorMetrics metrics;  // as in the coordinator: the job's gauges are kept up to date
  auto job = JobState::Create(bench::SixStageDeclaration("bench", 0, world), o, &metrics);
  if (!job.ok()) {
    state.SkipWithError(std::string(job.status().message()).c_str());
    return;
  }
  int64_t step = 0, now = 0;
  for (auto _ : state) {
    IngestRound(**job, msgs, static_cast<size_t>(step % kVariants) * world, world, step, now);
    ++step;
    now += 1'000'000;
  }
  state.SetItemsProcessed(state.iterations() * world);
  state.counters["rank_steps_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * world), benchmark::Counter::kIsRate);
  state.counters["wire_bytes_per_rank_step"] =
      static_cast<double>(wire_bytes) / static_cast<double>(msgs.size());
  // The per-step frontier summary as kept for queries (a StepSummary protobuf; the archive
  // goal is <= 32 bytes per step).
  v1::GetStepsReply summaries;
  (*job)->Steps(std::max<int64_t>(0, step - 1000), step, 1000, &summaries);
  size_t summary_bytes = 0;
  for (const v1::StepSummary& s : summaries.steps()) summary_bytes += s.ByteSizeLong();
  state.counters["summary_bytes_per_step"] =
      summaries.steps_size() > 0 ? static_cast<double>(summary_bytes) / summaries.steps_size() : 0;
  // As the job holds them: most in summary blocks (docs/journal-format.md "Summary blocks").
  const auto [held_steps, held_bytes] = (*job)->HistoryFootprint();
  state.counters["history_bytes_per_step"] =
      held_steps > 0 ? static_cast<double>(held_bytes) / static_cast<double>(held_steps) : 0;
  state.counters["heap_bytes_per_rank"] =
      static_cast<double>(mallinfo2().uordblks - heap_before) / world;
  job->reset();
  RemoveBenchDir(state, dir);
}
BENCHMARK(BM_CoordinatorIngest)->Arg(1024)->Arg(4096)->Arg(16384)->Unit(benchmark::kMillisecond);
// The shape the sidecar's default batching sends (daemon/sidecar/batch_hold.h): each rank's
// message holds 8 steps, so a node's batch opens 8 steps that all close once the last node's
// batch came, and the job keeps its raw window (history_rank_steps at its default). At 100,000
// ranks those 8 closes run back to back under the job's lock, between the last batch and the
// verdict: what a step's close costs there is on the verdict's path (docs/results.md).
// With a second argument of 1, each rank's node is its own of world/8 nodes and the job tells
// its closed windows to the coordinator's observers (automatic captures, the node ledger), as
// the coordinator does by default: what a window close costs them at that world size.
void BM_CoordinatorIngestBatched(benchmark::State& state) {
  const int world = static_cast<int>(state.range(0));
  const bool observers = state.range(1) != 0;
  constexpr int kSteps = 8;     // per message
  constexpr int kVariants = 4;  // distinct batches per rank, cycled
  const std::string dir = MakeBenchDir();
  if (dir.empty()) {
    state.SkipWithError("mkdtemp");
    return;
  }
  JobOptions o = BenchJobOptions(dir, JobOptions{}.history_rank_steps);
  std::vector<v1::RankSteps> msgs = EncodeMessages(world, kVariants, kSteps, /*seed=*/5);
  std::vector<std::string> nodes;
  CaptureTrigger trigger(CapturePolicyOptions{});
  std::unique_ptr<NodeLedger> ledger;
  JournalOpenInfo info;
  if (observers) {
    for (int n = 0; n < (world + 7) / 8; ++n) nodes.push_back("node-" + std::to_string(n));
    trigger.set_automatic(true);
    auto opened = NodeLedger::Open(NodeLedgerOptions{.path = dir + "/nodes.ledger",
                                                     .fsync = false,
                                                     .classes = {},
                                                     .max_nodes = 100'000,
                                                     .jobs_kept = 16},
                                   &info);
    if (!opened.ok()) {
      state.SkipWithError(std::string(opened.status().message()).c_str());
      return;
    }
    ledger = std::move(*opened);
    o.observers = {&trigger, ledger.get()};
  }
  CoordinatorMetrics metrics;
  auto job = JobState::Create(bench::SixStageDeclaration("bench", 0, world), o, &metrics);
  if (!job.ok()) {
    state.SkipWithError(std::string(job.status().message()).c_str());
    return;
  }
  int64_t batch = 0, now = 0;
  for (auto _ : state) {
    IngestRound(**job, msgs, static_cast<size_t>(batch % kVariants) * world, world, batch * kSteps,
                now, observers ? &nodes : nullptr);
    ++batch;
    now += 8'000'000;
  }
  state.SetItemsProcessed(state.iterations() * world * kSteps);
  state.counters["rank_steps_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * world * kSteps), benchmark::Counter::kIsRate);
  job->reset();
  ledger.reset();
  RemoveBenchDir(state, dir);
}
BENCHMARK(BM_CoordinatorIngestBatched)
    ->Args({16384, 0})
    ->Args({100000, 0})
    ->Args({100000, 1})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace stagefrontier
