#include "client/probe/host_clock_backend.h"

#include <atomic>
#include <vector>

#include "shm/monotonic_clock.h"
#include "shm/segment_layout_v2.h"

namespace stagefrontier::probe {
namespace {

class HostClockBackend final : public EventBackend {
 public:
  explicit HostClockBackend(size_t capacity) : times_(capacity) {}
  const char* name() const override { return "host_clock"; }
  uint32_t ring_backend() const override { return shm::v2::kProbeBackendHostClock; }
  size_t capacity() const override { return times_.size(); }
  bool Record(size_t index, void* /*stream*/) noexcept override {
    if (index >= times_.size()) return false;
    times_[index].store(shm::MonotonicNowNs(), std::memory_order_release);
    return true;
  }
  EventStatus Query(size_t index, int64_t* t_ns) noexcept override {
    if (index >= times_.size()) return EventStatus::kError;
    *t_ns = times_[index].load(std::memory_order_acquire);
    return EventStatus::kReady;
  }

 private:
  std::vector<std::atomic<int64_t>> times_;
};

}  // namespace

std::unique_ptr<EventBackend> MakeHostClockBackend(size_t capacity) {
  return std::make_unique<HostClockBackend>(capacity);
}

}  // namespace stagefrontier::probe
