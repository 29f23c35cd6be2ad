#include "client/probe/probe_runtime.h"

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/launcher_environment.h"
#include "client/probe/host_clock_backend.h"
#include "client/probe/probe_ring_attach.h"
#include "shm/monotonic_clock.h"

namespace stagefrontier::probe {
namespace {

constexpr size_t kMaxPending = 4096;

// The CUDA backend lives in its own library (built by nvcc) so that this one needs no CUDA
// at link time; it is looked for beside this library, then on the loader's path.
using CreateCudaBackend = EventBackend* (*)(size_t capacity, char* error, size_t error_len);

std::string OwnDirectory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&OwnDirectory), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

absl::StatusOr<std::unique_ptr<EventBackend>> LoadCudaBackend(size_t capacity) {
  void* lib = dlopen((OwnDirectory() + "libsfprobe_cuda.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libsfprobe_cuda.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot load libsfprobe_cuda.so: ", dlerror()));
  }
  auto create = reinterpret_cast<CreateCudaBackend>(dlsym(lib, "sf_probe_create_cuda_backend"));
  if (create == nullptr) {
    return absl::UnavailableError("libsfprobe_cuda.so has no sf_probe_create_cuda_backend");
  }
  char error[256] = {0};
  EventBackend* backend = create(capacity, error, sizeof(error));
  if (backend == nullptr) return absl::UnavailableError(error);
  return std::unique_ptr<EventBackend>(backend);
}

class Runtime {
 public:
  static Runtime& Get() {
    static Runtime* runtime = new Runtime();  // never destroyed: NCCL may run during exit
    return *runtime;
  }
  CollectiveTracker* tracker() const { return tracker_.get(); }
  void Stop() {
    if (!running_.exchange(false)) return;
    if (resolver_.joinable()) resolver_.join();
    if (tracker_) tracker_->Poll(shm::MonotonicNowNs());
  }

 private:
  Runtime() {
    absl::Status s = Start();
    if (!s.ok()) {
      std::fprintf(stderr,
                   "stagefrontier probe: collectives are not timed: %s (the trainer is not "
                   "affected)\n",
                   std::string(s.message()).c_str());
      tracker_.reset();
    }
  }

  absl::Status Start() {
    const char* enabled = std::getenv("STAGEFRONTIER_PROBE");
    if (enabled != nullptr && std::string(enabled) == "0") {
      return absl::CancelledError("disabled by STAGEFRONTIER_PROBE=0");
    }
    const char* sample = std::getenv("STAGEFRONTIER_PROBE_SAMPLE");
    absl::StatusOr<SamplingPolicy> policy = ParseSamplingPolicy(sample ? sample : "all");
    if (!policy.ok()) return policy.status();
    int64_t poll_us = 500;
    if (const char* p = std::getenv("STAGEFRONTIER_PROBE_POLL_US")) {
      if (!absl::SimpleAtoi(p, &poll_us) || poll_us < 10 || poll_us > 1'000'000) {
        return absl::InvalidArgumentError(absl::StrCat("STAGEFRONTIER_PROBE_POLL_US=\"", p,
                                                       "\" is not a period in 10..1000000 us"));
      }
    }
    const char* which = std::getenv("STAGEFRONTIER_PROBE_BACKEND");
    const std::string want = which ? which : "auto";
    if (want != "auto" && want != "cuda" && want != "host_clock") {
      return absl::InvalidArgumentError(absl::StrCat("STAGEFRONTIER_PROBE_BACKEND=\"", want,
                                                     "\" is not auto, cuda or host_clock"));
    }
    if (want != "host_clock") {
      absl::StatusOr<std::unique_ptr<EventBackend>> cuda = LoadCudaBackend(2 * kMaxPending);
      if (cuda.ok()) {
        backend_ = std::move(*cuda);
      } else if (want == "cuda") {
        return cuda.status();
      } else {
        std::fprintf(stderr, "stagefrontier probe: using the host clock: %s\n",
                     std::string(cuda.status().message()).c_str());
      }
    }
    if (!backend_) backend_ = MakeHostClockBackend(2 * kMaxPending);
    absl::StatusOr<LauncherIdentity> id = ResolveIdentity(ClientOptions{}, ::getenv);
    if (!id.ok()) return id.status();
    absl::StatusOr<AttachedProbeRing> ring =
        AttachProbeRing(*id, static_cast<shm::v2::ProbeBackend>(backend_->ring_backend()));
    if (!ring.ok()) return ring.status();
    ring_ = std::move(*ring);
    TrackerOptions options;
    options.max_pending = kMaxPending;
    options.sampling = *policy;
    options.slot = &ring_.segment->view().slot(ring_.local_rank);
    tracker_ = std::make_unique<CollectiveTracker>(backend_.get(), ring_.writer.get(), options);
    running_.store(true);
    resolver_ = std::thread([this, poll_us] {
      while (running_.load(std::memory_order_relaxed)) {
        tracker_->Poll(shm::MonotonicNowNs());
        std::this_thread::sleep_for(std::chrono::microseconds(poll_us));
      }
    });
    std::atexit([] { Runtime::Get().Stop(); });
    return absl::OkStatus();
  }

  std::unique_ptr<EventBackend> backend_;
  AttachedProbeRing ring_;
  std::unique_ptr<CollectiveTracker> tracker_;
  std::atomic<bool> running_{false};
  std::thread resolver_;
};

}  // namespace

absl::StatusOr<SamplingPolicy> ParseSamplingPolicy(const std::string& text) {
  SamplingPolicy p;
  if (text == "all") return p;
  if (text == "request") {
    p.mode = SamplingPolicy::Mode::kOnRequest;
    return p;
  }
  uint32_t n = 0;
  if (text.rfind("every:", 0) == 0 && absl::SimpleAtoi(text.substr(6), &n) && n >= 1) {
    p.mode = SamplingPolicy::Mode::kEveryN;
    p.every_n_steps = n;
    return p;
  }
  return absl::InvalidArgumentError(absl::StrCat("STAGEFRONTIER_PROBE_SAMPLE=\"", text,
                                                 "\" is not all, every:N (N >= 1) or request"));
}

CollectiveTracker* ProbeRuntime::Tracker() noexcept { return Runtime::Get().tracker(); }

void ProbeRuntime::Shutdown() noexcept { Runtime::Get().Stop(); }

}  // namespace stagefrontier::probe
