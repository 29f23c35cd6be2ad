// The CUDA event backend, built by nvcc into libsfprobe_cuda.so (BUILD.bazel) and loaded by
// the probe at run time, so that libsfprobe.so itself never links CUDA.
//
// Every event is created up front with timing enabled. Record is cudaEventRecord on the
// collective's own stream (never on a compute stream, never a synchronization). The resolver
// turns a completed event into CLOCK_MONOTONIC time through an anchor: an event recorded on
// the probe's own stream and synchronized on the resolver thread, whose host time is taken
// right after the synchronization; an event's time is the anchor's plus
// cudaEventElapsedTime(anchor, event). The anchor is renewed every second, so clock drift
// between GPU and host stays far below a microsecond per anchor.
#include <cuda_runtime.h>

#include <cstdio>
#include <ctime>
#include <vector>

#include "client/probe/event_backend.h"
#include "shm/segment_layout_v2.h"

namespace stagefrontier::probe {
namespace {

int64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

class CudaEventBackend final : public EventBackend {
 public:
  const char* name() const override { return "cuda"; }
  uint32_t ring_backend() const override { return shm::v2::kProbeBackendCuda; }
  size_t capacity() const override { return events_.size(); }

  bool Init(size_t capacity, char* error, size_t error_len) {
    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
      std::snprintf(error, error_len, "no CUDA device (%s)",
                    e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
      return false;
    }
    if ((e = cudaGetDevice(&device_)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&anchor_stream_, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreate(&anchor_)) != cudaSuccess) {
      std::snprintf(error, error_len, "CUDA setup failed: %s", cudaGetErrorString(e));
      return false;
    }
    events_.resize(capacity);
    for (cudaEvent_t& ev : events_) {
      if ((e = cudaEventCreate(&ev)) != cudaSuccess) {
        std::snprintf(error, error_len, "cudaEventCreate failed: %s", cudaGetErrorString(e));
        return false;
      }
    }
    return Anchor();
  }

  bool Record(size_t index, void* stream) noexcept override {
    if (index >= events_.size()) return false;
    return cudaEventRecord(events_[index], static_cast<cudaStream_t>(stream)) == cudaSuccess;
  }

  EventStatus Query(size_t index, int64_t* t_ns) noexcept override {
    if (index >= events_.size()) return EventStatus::kError;
    const cudaError_t q = cudaEventQuery(events_[index]);
    if (q == cudaErrorNotReady) return EventStatus::kPending;
    if (q != cudaSuccess) return EventStatus::kError;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, anchor_, events_[index]) != cudaSuccess) {
      return EventStatus::kError;
    }
    *t_ns = anchor_host_ns_ + static_cast<int64_t>(static_cast<double>(ms) * 1e6);
    return EventStatus::kReady;
  }

  void Maintain(int64_t now_ns) noexcept override {
    if (now_ns - anchor_host_ns_ > 1'000'000'000) Anchor();
  }

 private:
  // Resolver thread only: the synchronization is on the probe's own idle stream.
  bool Anchor() noexcept {
    cudaSetDevice(device_);
    if (cudaEventRecord(anchor_, anchor_stream_) != cudaSuccess) return false;
    if (cudaEventSynchronize(anchor_) != cudaSuccess) return false;
    anchor_host_ns_ = NowNs();
    return true;
  }

  int device_ = 0;
  cudaStream_t anchor_stream_ = nullptr;
  cudaEvent_t anchor_ = nullptr;
  int64_t anchor_host_ns_ = 0;
  std::vector<cudaEvent_t> events_;
};

}  // namespace
}  // namespace stagefrontier::probe

extern "C" __attribute__((visibility("default"))) stagefrontier::probe::EventBackend*
sf_probe_create_cuda_backend(size_t capacity, char* error, size_t error_len) {
  auto* backend = new stagefrontier::probe::CudaEventBackend();
  if (!backend->Init(capacity, error, error_len)) {
    delete backend;
    return nullptr;
  }
  return backend;
}
