// The stub's cost inside the trainer (goal in docs/results.md: <= 30 ns median per stage mark; the
// clock read alone is about 24 ns on these machines). Run with --config=opt:
//   bazel run --config=opt //tests/client:client_benchmark -- --benchmark_repetitions=5
// The reader is simulated by handing the ring back every 512 steps (one store), so the
// publish path is measured, not the full-ring drop path.
#include <benchmark/benchmark.h>
#include <stdlib.h>
#include <time.h>

#include <string>

#include "client/client.h"
#include "shm/segment_file.h"

namespace {

using stagefrontier::Client;
using stagefrontier::StageKind;

std::unique_ptr<Client> MakeClient(const std::string& job) {
  stagefrontier::ClientOptions o;
  char tmpl[] = "/tmp/sfbenchXXXXXX";
  o.shm_dir = mkdtemp(tmpl);
  o.job_id = job;
  o.rank = 0;
  o.world_size = 1;
  o.ring_capacity = 1024;
  o.quiet = true;
  auto c = Client::Create({{"data", StageKind::kIo},
                           {"forward", StageKind::kCompute},
                           {"backward", StageKind::kCompute},
                           {"grad_sync", StageKind::kSync},
                           {"optimizer", StageKind::kCompute},
                           {"log", StageKind::kIo}},
                          o);
  if (!c.ok() || !(*c)->enabled()) abort();
  return *std::move(c);
}

void BM_ClockRead(benchmark::State& state) {
  timespec ts;
  for (auto _ : state) {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    benchmark::DoNotOptimize(ts);
  }
}
BENCHMARK(BM_ClockRead);

// One explicit mark: a clock read and the stage's accumulator update.
void BM_StageMark(benchmark::State& state) {
  auto c = MakeClient("mark");
  c->BeginStep();
  Client::StageId k = 0;
  for (auto _ : state) {
    c->Mark(k);
    k = (k + 1) % 6;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StageMark);

// One RAII scope: two marks (enter and exit), reported per mark.
void BM_StageScope(benchmark::State& state) {
  auto c = MakeClient("scope");
  c->BeginStep();
  for (auto _ : state) {
    auto scope = c->Scope(1);
  }
  state.SetItemsProcessed(2 * state.iterations());
  state.counters["ns_per_mark"] = benchmark::Counter(
      2 * state.iterations(), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_StageScope);

// A whole step: begin, 6 stage scopes, end (record written and published to the ring).
void BM_Step6Stages(benchmark::State& state) {
  auto c = MakeClient("step");
  stagefrontier::shm::SegmentOptions so;
  auto seg =
      stagefrontier::shm::MappedSegment::Attach(c->identity().shm_dir + "/stagefrontier.step.seg");
  if (!seg.ok()) abort();
  auto& slot = (*seg)->view().slot(0);
  int64_t n = 0;
  for (auto _ : state) {
    c->BeginStep();
    for (Client::StageId k = 0; k < 6; ++k) {
      auto scope = c->Scope(k);
    }
    c->EndStep();
    if ((++n & 511) == 0) slot.read_cursor.store(slot.write_cursor.load());
  }
  const auto st = c->stats();
  state.counters["recorded"] = static_cast<double>(st.steps_recorded);
  state.counters["dropped"] = static_cast<double>(st.steps_dropped_full);
}
BENCHMARK(BM_Step6Stages);

}  // namespace
