#include "shm/open_stage.h"

#include <thread>

namespace stagefrontier::shm {

void ResetOpenStage(v1::SlotHeader& slot) noexcept {
  const uint64_t s = slot.open_seq.load(std::memory_order_relaxed);
  const uint64_t odd = (s | 1) + ((s & 1) ? 2 : 0);  // next odd value
  slot.open_seq.store(odd, std::memory_order_relaxed);
  slot.open_step.store(0, std::memory_order_release);
  slot.open_since_ns.store(0, std::memory_order_release);
  slot.open_stage.store(kOpenNone, std::memory_order_release);
  slot.open_seq.store(odd + 1, std::memory_order_release);
}

bool ReadOpenStage(const v1::SlotHeader& slot, OpenStage* out, int attempts) noexcept {
  for (int i = 0; i < attempts; ++i) {
    const uint64_t s1 = slot.open_seq.load(std::memory_order_acquire);
    if ((s1 & 1) == 0) {
      OpenStage o;
      o.seq = s1;
      o.step = slot.open_step.load(std::memory_order_acquire);
      o.since_ns = slot.open_since_ns.load(std::memory_order_acquire);
      o.code = slot.open_stage.load(std::memory_order_acquire);
      if (slot.open_seq.load(std::memory_order_relaxed) == s1) {
        *out = o;
        return true;
      }
    }
    // The writer holds the lock for a few stores: let it finish.
    if (i >= 8) std::this_thread::yield();
  }
  return false;
}

}  // namespace stagefrontier::shm
