// A synthetic data-parallel trainer: one process per rank, instrumented with the real stub,
// whose stages take timed sleeps and whose `grad_sync` stage is a real wait at a barrier
// shared with the other processes. One rank can be slowed in one stage, persistently or
// every N steps: the ground truth for the demo, the end-to-end tests and the evaluation.
// Identity comes from the launcher's environment (RANK, LOCAL_RANK, WORLD_SIZE, ...).
//
//   RANK=3 LOCAL_RANK=3 WORLD_SIZE=16 LOCAL_WORLD_SIZE=8 TORCHELASTIC_RUN_ID=demo
//     synthetic_trainer --steps 300 --barrier /dev/shm/demo.barrier
//                       --fault data:11:15 --fault-start 50
//
// With --collective nccl the gradient sync is an ncclAllReduce found through the dynamic
// linker (a real libnccl, or the tests' fake one over the same barrier), so that the
// collective probe (libsfprobe.so) can be run on it; --mixed-backward folds the sync into a
// `mixed` backward stage; --marks-ahead-rank R makes rank R mark its sync stage finished
// before issuing the collective (stage marks that do not bracket the collective);
// --capture-callbacks registers capture callbacks (the C++ API a trainer uses to drive its own
// profiler) that only say on stderr which steps they would profile.
#include <dlfcn.h>
#include <time.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/client.h"
#include "client/examples/process_barrier.h"
#include "client/probe/nccl_api.h"

namespace {

using stagefrontier::StageKind;

void SleepUntil(int64_t deadline_ns) {
  timespec ts{static_cast<time_t>(deadline_ns / 1'000'000'000),
              static_cast<long>(deadline_ns % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"synthetic_trainer: one rank of a multi-process synthetic data-parallel job"};
  int steps = 200;
  std::string barrier_path;
  std::string stage_ms = "data=4,forward=8,backward=12,optimizer=3";
  double jitter = 0.03;
  std::string fault;
  int fault_every = 1;
  int fault_start = 0;
  int fault_stop = -1;
  uint32_t seed = 1;
  std::string collective = "barrier";
  bool mixed_backward = false;
  int marks_ahead_rank = -1;
  bool capture_callbacks = false;
  app.add_option("--steps", steps, "steps to run")->capture_default_str();
  app.add_option("--barrier", barrier_path, "barrier file shared by the job's processes")
      ->required();
  app.add_option("--stage-ms", stage_ms, "local stage times (grad_sync is the barrier wait)")
      ->capture_default_str();
  app.add_option("--jitter", jitter, "relative jitter of every stage")->capture_default_str();
  app.add_option("--fault", fault, "STAGE:RANK:MS slow STAGE on RANK by MS milliseconds");
  app.add_option("--fault-every", fault_every, "inject every N steps (1: every step)");
  app.add_option("--fault-start", fault_start, "first step with the fault");
  app.add_option("--fault-stop", fault_stop, "first step without it again (-1: never stops)");
  app.add_option("--seed", seed, "jitter seed (mixed with the rank)");
  app.add_option("--collective", collective,
                 "barrier: wait at --barrier; nccl: ncclAllReduce from the loaded libnccl")
      ->check(CLI::IsMember({"barrier", "nccl"}))
      ->capture_default_str();
  app.add_flag("--mixed-backward", mixed_backward,
               "no grad_sync stage: the sync happens inside a mixed backward stage");
  app.add_option("--marks-ahead-rank", marks_ahead_rank,
                 "this rank marks grad_sync finished before issuing the collective");
  app.add_flag("--capture-callbacks", capture_callbacks,
               "take captures the coordinator asks for: callbacks that say so on stderr");
  CLI11_PARSE(app, argc, argv);

  const std::vector<std::string> local = {"data", "forward", "backward", "optimizer"};
  std::vector<double> ms(local.size(), 1.0);
  for (absl::string_view kv : absl::StrSplit(stage_ms, ',', absl::SkipEmpty())) {
    std::vector<std::string> p = absl::StrSplit(kv, '=');
    double v = 0;
    bool found = false;
    for (size_t k = 0; k < local.size(); ++k) {
      if (p.size() == 2 && p[0] == local[k] && absl::SimpleAtod(p[1], &v) && v >= 0) {
        ms[k] = v;
        found = true;
      }
    }
    if (!found) {
      std::fprintf(stderr, "synthetic_trainer: bad --stage-ms entry \"%s\"\n",
                   std::string(kv).c_str());
      return 2;
    }
  }
  std::string fault_stage;
  int fault_rank = -1;
  double fault_ms = 0;
  if (!fault.empty()) {
    std::vector<std::string> p = absl::StrSplit(fault, ':');
    if (p.size() != 3 || !absl::SimpleAtoi(p[1], &fault_rank) ||
        !absl::SimpleAtod(p[2], &fault_ms)) {
      std::fprintf(stderr, "synthetic_trainer: --fault wants STAGE:RANK:MS, got \"%s\"\n",
                   fault.c_str());
      return 2;
    }
    fault_stage = p[0];
  }

  using AllReduceFn = decltype(&ncclAllReduce);
  AllReduceFn all_reduce = nullptr;
  if (collective == "nccl") {
    all_reduce = reinterpret_cast<AllReduceFn>(dlsym(RTLD_DEFAULT, "ncclAllReduce"));
    if (all_reduce == nullptr) {
      std::fprintf(stderr, "synthetic_trainer: --collective nccl: no ncclAllReduce is loaded\n");
      return 2;
    }
  }
  auto client = mixed_backward
                    ? stagefrontier::Client::Create({{"data", StageKind::kIo},
                                                     {"forward", StageKind::kCompute},
                                                     {"backward", StageKind::kMixed},
                                                     {"optimizer", StageKind::kCompute}})
                    : stagefrontier::Client::Create({{"data", StageKind::kIo},
                                                     {"forward", StageKind::kCompute},
                                                     {"backward", StageKind::kCompute},
                                                     {"grad_sync", StageKind::kSync},
                                                     {"optimizer", StageKind::kCompute}});
  if (!client.ok()) {
    std::fprintf(stderr, "synthetic_trainer: %s\n", std::string(client.status().message()).c_str());
    return 2;
  }
  stagefrontier::Client& c = **client;
  const int rank = c.identity().rank;
  if (capture_callbacks) {
    stagefrontier::Client::CaptureCallbacks cb;
    cb.user = &c;
    cb.begin = [](void* user, int64_t first, int64_t last) {
      std::fprintf(stderr, "synthetic_trainer: rank %d: capture of steps %lld..%lld begun\n",
                   static_cast<stagefrontier::Client*>(user)->identity().rank,
                   static_cast<long long>(first), static_cast<long long>(last));
      return 0;
    };
    cb.end = [](void* user, int64_t first, int64_t last, uint64_t*) {
      std::fprintf(stderr, "synthetic_trainer: rank %d: capture of steps %lld..%lld ended\n",
                   static_cast<stagefrontier::Client*>(user)->identity().rank,
                   static_cast<long long>(first), static_cast<long long>(last));
      return 0;
    };
    c.SetCaptureCallbacks(cb);
  }
  auto barrier = stagefrontier::ProcessBarrier::Open(barrier_path, rank, c.identity().world_size);
  if (!barrier.ok()) {
    std::fprintf(stderr, "synthetic_trainer: %s\n",
                 std::string(barrier.status().message()).c_str());
    return 2;
  }
  std::mt19937_64 rng(seed * 1000003ULL + static_cast<uint64_t>(rank));
  std::uniform_real_distribution<double> noise(1 - jitter, 1 + jitter);
  const stagefrontier::Client::StageId ids[] = {c.stage_id("data"), c.stage_id("forward"),
                                                c.stage_id("backward"), c.stage_id("optimizer")};
  const auto sync = mixed_backward ? ids[2] : c.stage_id("grad_sync");
  float gradient[256] = {0};
  auto synchronize = [&] {
    if (all_reduce == nullptr) {
      (*barrier)->Wait();
      return;
    }
    const ncclResult_t r =
        all_reduce(gradient, gradient, 256, ncclFloat32, ncclSum, nullptr, nullptr);
    if (r != ncclSuccess) std::fprintf(stderr, "synthetic_trainer: ncclAllReduce: %d\n", r);
  };
  (*barrier)->Wait();  // everyone starts together
  for (int step = 0; step < steps; ++step) {
    c.BeginStep(step);
    for (size_t k = 0; k < local.size(); ++k) {
      double d = ms[k] * noise(rng);
      if (rank == fault_rank && local[k] == fault_stage && step >= fault_start &&
          (fault_stop < 0 || step < fault_stop) &&
          (fault_every <= 1 || (step - fault_start) % fault_every == 0)) {
        d += fault_ms;
      }
      if (mixed_backward && local[k] == "backward") {
        // Local work and the collective wait in one stage.
        auto scope = c.Scope(ids[k]);
        SleepUntil(stagefrontier::shm::MonotonicNowNs() + static_cast<int64_t>(d * 1e6));
        synchronize();
        continue;
      }
      {
        auto scope = c.Scope(ids[k]);
        // A stage of 0 ms stays empty (no sleep call): it stands for a stage never worked in.
        if (d > 0) SleepUntil(stagefrontier::shm::MonotonicNowNs() + static_cast<int64_t>(d * 1e6));
      }
      if (local[k] == "backward") {
        if (rank == marks_ahead_rank) {
          { auto scope = c.Scope(sync); }
          synchronize();  // issued after its stage was marked finished
        } else {
          auto scope = c.Scope(sync);
          synchronize();
        }
      }
    }
    c.EndStep();
  }
  (*barrier)->Leave();
  const stagefrontier::ClientStats s = c.stats();
  if (s.steps_recorded + s.steps_paused + s.steps_sampled_out != static_cast<uint64_t>(steps)) {
    std::fprintf(stderr, "synthetic_trainer: rank %d recorded %llu of %d steps (%llu dropped)\n",
                 rank, static_cast<unsigned long long>(s.steps_recorded), steps,
                 static_cast<unsigned long long>(s.steps_dropped_full));
  }
  return 0;
}
