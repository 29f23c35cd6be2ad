// A synthetic data-parallel trainer: one process per rank, instrumented with the real stub,
// whose stages take timed sleeps and whose `grad_sync` stage is a real wait at a barrier
// shared with the other processes. One rank (or several: RANK as R[+R...]) can be slowed in
// one stage, persistently or every N steps: the ground truth for the demo, the end-to-end
// tests and the evaluation.
// Identity comes from the launcher's environment (RANK, LOCAL_RANK, WORLD_SIZE, ...).
//
//   RANK=3 LOCAL_RANK=3 WORLD_SIZE=16 LOCAL_WORLD_SIZE=8 TORCHELASTIC_RUN_ID=demo
//     synthetic_trainer --steps 300 --barrier /dev/shm/demo.barrier
//                       --fault data:11:15 --fault-start 50
//   (--fault forward:8+9+10+11:2 slows ranks 8 to 11 alike, e.g. every rank of one node)
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

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "client/client.h"
#include "client/examples/process_barrier.h"
#include "client/probe/nccl_api.h"

namespace {

using stagefrontier::StageKind;

// The stages that do local work, in schema order; grad_sync (the wait) follows backward.
constexpr std::array<absl::string_view, 4> kLocalStages = {"data", "forward", "backward",
                                                           "optimizer"};

void SleepUntil(int64_t deadline_ns) {
  timespec ts{static_cast<time_t>(deadline_ns / 1'000'000'000),
              static_cast<long>(deadline_ns % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

struct Flags {
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
};

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--steps", f.steps, "steps to run")->capture_default_str();
  app.add_option("--barrier", f.barrier_path, "barrier file shared by the job's processes")
      ->required();
  app.add_option("--stage-ms", f.stage_ms, "local stage times (grad_sync is the barrier wait)")
      ->capture_default_str();
  app.add_option("--jitter", f.jitter, "relative jitter of every stage")->capture_default_str();
  app.add_option("--fault", f.fault,
                 "STAGE:RANK:MS slow STAGE on RANK by MS milliseconds (RANK: R[+R...], several)");
  app.add_option("--fault-every", f.fault_every, "inject every N steps (1: every step)");
  app.add_option("--fault-start", f.fault_start, "first step with the fault");
  app.add_option("--fault-stop", f.fault_stop, "first step without it again (-1: never stops)");
  app.add_option("--seed", f.seed, "jitter seed (mixed with the rank)");
  app.add_option("--collective", f.collective,
                 "barrier: wait at --barrier; nccl: ncclAllReduce from the loaded libnccl")
      ->check(CLI::IsMember({"barrier", "nccl"}))
      ->capture_default_str();
  app.add_flag("--mixed-backward", f.mixed_backward,
               "no grad_sync stage: the sync happens inside a mixed backward stage");
  app.add_option("--marks-ahead-rank", f.marks_ahead_rank,
                 "this rank marks grad_sync finished before issuing the collective");
  app.add_flag("--capture-callbacks", f.capture_callbacks,
               "take captures the coordinator asks for: callbacks that say so on stderr");
}

// --stage-ms into milliseconds per local stage (1 ms where not given); false on a bad entry.
bool ParseStageMs(const std::string& stage_ms, std::vector<double>* ms) {
  ms->assign(kLocalStages.size(), 1.0);
  for (absl::string_view kv : absl::StrSplit(stage_ms, ',', absl::SkipEmpty())) {
    std::vector<std::string> p = absl::StrSplit(kv, '=');
    double v = 0;
    bool found = false;
    for (size_t k = 0; k < kLocalStages.size(); ++k) {
      if (p.size() == 2 && p[0] == kLocalStages[k] && absl::SimpleAtod(p[1], &v) && v >= 0) {
        (*ms)[k] = v;
        found = true;
      }
    }
    if (!found) {
      std::fprintf(stderr, "synthetic_trainer: bad --stage-ms entry \"%s\"\n",
                   std::string(kv).c_str());
      return false;
    }
  }
  return true;
}

// The injected fault: which ranks, stage, how much and on which steps.
struct Fault {
  std::string stage;
  std::vector<int> ranks;
  double ms = 0;
  int every = 1;
  int start = 0;
  int stop = -1;

  bool Hits(int r, absl::string_view s, int step) const {
    return s == stage && std::find(ranks.begin(), ranks.end(), r) != ranks.end() &&
           step >= start && (stop < 0 || step < stop) &&
           (every <= 1 || (step - start) % every == 0);
  }
};

// The fault the flags describe (none when --fault is empty); false when --fault is malformed.
bool ParseFault(const Flags& f, Fault* fault) {
  fault->every = f.fault_every;
  fault->start = f.fault_start;
  fault->stop = f.fault_stop;
  if (f.fault.empty()) return true;
  std::vector<std::string> p = absl::StrSplit(f.fault, ':');
  bool ok = p.size() == 3 && absl::SimpleAtod(p[2], &fault->ms);
  if (ok) {
    // RANK is R[+R...]: one rank or several slowed alike.
    for (absl::string_view r : absl::StrSplit(p[1], '+')) {
      int rank = -1;
      if (!absl::SimpleAtoi(r, &rank)) {
        ok = false;
        break;
      }
      fault->ranks.push_back(rank);
    }
  }
  if (!ok) {
    std::fprintf(stderr,
                 "synthetic_trainer: --fault wants STAGE:RANK[+RANK...]:MS, got \"%s\"\n",
                 f.fault.c_str());
    return false;
  }
  fault->stage = p[0];
  return true;
}

absl::StatusOr<std::unique_ptr<stagefrontier::Client>> CreateClient(bool mixed_backward) {
  return mixed_backward ? stagefrontier::Client::Create({{"data", StageKind::kIo},
                                                         {"forward", StageKind::kCompute},
                                                         {"backward", StageKind::kMixed},
                                                         {"optimizer", StageKind::kCompute}})
                        : stagefrontier::Client::Create({{"data", StageKind::kIo},
                                                         {"forward", StageKind::kCompute},
                                                         {"backward", StageKind::kCompute},
                                                         {"grad_sync", StageKind::kSync},
                                                         {"optimizer", StageKind::kCompute}});
}

// Capture callbacks that only say on stderr which steps they would profile.
void SetPrintingCaptureCallbacks(stagefrontier::Client& c) {
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

// One rank's training loop: timed sleeps inside stage scopes, the sync a real wait.
class Trainer {
 public:
  using AllReduceFn = decltype(&ncclAllReduce);

  Trainer(const Flags& flags, const Fault& fault, std::vector<double> ms, AllReduceFn all_reduce,
          stagefrontier::Client& c, stagefrontier::ProcessBarrier& barrier)
      : flags_(flags),
        fault_(fault),
        ms_(std::move(ms)),
        all_reduce_(all_reduce),
        c_(c),
        barrier_(barrier),
        rank_(c.identity().rank),
        rng_(flags.seed * 1000003ULL + static_cast<uint64_t>(rank_)),
        noise_(1 - flags.jitter, 1 + flags.jitter),
        ids_{c.stage_id("data"), c.stage_id("forward"), c.stage_id("backward"),
             c.stage_id("optimizer")},
        sync_(flags.mixed_backward ? ids_[2] : c.stage_id("grad_sync")) {}

  void Step(int step) {
    c_.BeginStep(step);
    for (size_t k = 0; k < kLocalStages.size(); ++k) {
      double d = ms_[k] * noise_(rng_);
      if (fault_.Hits(rank_, kLocalStages[k], step)) d += fault_.ms;
      if (flags_.mixed_backward && kLocalStages[k] == "backward") {
        // Local work and the collective wait in one stage.
        auto scope = c_.Scope(ids_[k]);
        SleepUntil(stagefrontier::shm::MonotonicNowNs() + static_cast<int64_t>(d * 1e6));
        Synchronize();
        continue;
      }
      {
        auto scope = c_.Scope(ids_[k]);
        // A stage of 0 ms stays empty (no sleep call): it stands for a stage never worked in.
        if (d > 0) SleepUntil(stagefrontier::shm::MonotonicNowNs() + static_cast<int64_t>(d * 1e6));
      }
      if (kLocalStages[k] == "backward") SyncStage();
    }
    c_.EndStep();
  }

 private:
  void SyncStage() {
    if (rank_ == flags_.marks_ahead_rank) {
      { auto scope = c_.Scope(sync_); }
      Synchronize();  // issued after its stage was marked finished
    } else {
      auto scope = c_.Scope(sync_);
      Synchronize();
    }
  }

  void Synchronize() {
    if (all_reduce_ == nullptr) {
      barrier_.Wait();
      return;
    }
    const ncclResult_t r =
        all_reduce_(gradient_, gradient_, 256, ncclFloat32, ncclSum, nullptr, nullptr);
    if (r != ncclSuccess) std::fprintf(stderr, "synthetic_trainer: ncclAllReduce: %d\n", r);
  }

  const Flags& flags_;
  const Fault& fault_;
  const std::vector<double> ms_;
  const AllReduceFn all_reduce_;
  stagefrontier::Client& c_;
  stagefrontier::ProcessBarrier& barrier_;
  const int rank_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> noise_;
  const stagefrontier::Client::StageId ids_[4];
  const stagefrontier::Client::StageId sync_;
  float gradient_[256] = {0};
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"synthetic_trainer: one rank of a multi-process synthetic data-parallel job"};
  Flags flags;
  AddFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  std::vector<double> ms;
  Fault fault;
  if (!ParseStageMs(flags.stage_ms, &ms) || !ParseFault(flags, &fault)) return 2;

  Trainer::AllReduceFn all_reduce = nullptr;
  if (flags.collective == "nccl") {
    all_reduce = reinterpret_cast<Trainer::AllReduceFn>(dlsym(RTLD_DEFAULT, "ncclAllReduce"));
    if (all_reduce == nullptr) {
      std::fprintf(stderr, "synthetic_trainer: --collective nccl: no ncclAllReduce is loaded\n");
      return 2;
    }
  }
  auto client = CreateClient(flags.mixed_backward);
  if (!client.ok()) {
    std::fprintf(stderr, "synthetic_trainer: %s\n", std::string(client.status().message()).c_str());
    return 2;
  }
  stagefrontier::Client& c = **client;
  const int rank = c.identity().rank;
  if (flags.capture_callbacks) SetPrintingCaptureCallbacks(c);
  auto barrier =
      stagefrontier::ProcessBarrier::Open(flags.barrier_path, rank, c.identity().world_size);
  if (!barrier.ok()) {
    std::fprintf(stderr, "synthetic_trainer: %s\n",
                 std::string(barrier.status().message()).c_str());
    return 2;
  }
  Trainer trainer(flags, fault, std::move(ms), all_reduce, c, **barrier);
  (*barrier)->Wait();  // everyone starts together
  for (int step = 0; step < flags.steps; ++step) trainer.Step(step);
  (*barrier)->Leave();
  const stagefrontier::ClientStats s = c.stats();
  if (s.steps_recorded + s.steps_paused + s.steps_sampled_out !=
      static_cast<uint64_t>(flags.steps)) {
    std::fprintf(stderr, "synthetic_trainer: rank %d recorded %llu of %d steps (%llu dropped)\n",
                 rank, static_cast<unsigned long long>(s.steps_recorded), flags.steps,
                 static_cast<unsigned long long>(s.steps_dropped_full));
  }
  return 0;
}
