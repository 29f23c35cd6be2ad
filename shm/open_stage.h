// Where a rank is right now: the stage its stub last opened, published in the slot's writer
// line at every stage begin (docs/segment-format.md, "Open stage"), so that the sidecar can
// name a stuck rank's stage, step and how long it has been there (issue "Hangs").
//
// One writer (the owning stub) under a sequence lock, no system call, no allocation: a few
// plain stores on x86. The reader (the sidecar) retries a bounded number of times.
//
//   OpenStageWriter w(&view.slot(i));            // stub, after ClaimSlot
//   w.Publish(step, now_ns, OpenCode(stage));     // stage `stage` of `step` opened at now_ns
//   OpenStage o;
//   if (ReadOpenStage(view.slot(i), &o) && o.in_stage()) { ... o.stage() ... }  // sidecar
#ifndef STAGEFRONTIER_SHM_OPEN_STAGE_H_
#define STAGEFRONTIER_SHM_OPEN_STAGE_H_

#include <atomic>
#include <cstdint>

#include "shm/segment_layout_v1.h"

namespace stagefrontier::shm {

// SlotHeader::open_stage values: 0 nothing published, 1 + k stage k is open, and:
inline constexpr uint32_t kOpenNone = v1::kOpenStageNone;
inline constexpr uint32_t kOpenBetweenSteps = v1::kOpenStageBetweenSteps;
inline constexpr uint32_t OpenCode(uint32_t stage) { return stage + 1; }

struct OpenStage {
  uint64_t seq = 0;  // even; changes at every publication (identifies this open stage)
  uint32_t code = kOpenNone;
  int64_t step = 0;      // the step it belongs to (between steps: the step that ended)
  int64_t since_ns = 0;  // when it opened, on the writer's CLOCK_MONOTONIC
  bool known() const { return code != kOpenNone; }
  bool between_steps() const { return code == kOpenBetweenSteps; }
  bool in_stage() const { return code != kOpenNone && code != kOpenBetweenSteps; }
  uint32_t stage() const { return code - 1; }  // only when in_stage()
};

// The stub's side. Publish() is inline: it runs at every mark.
class OpenStageWriter {
 public:
  OpenStageWriter() = default;
  // Starts from the slot's current sequence number (ClaimSlot left it even).
  explicit OpenStageWriter(v1::SlotHeader* slot)
      : slot_(slot), seq_(slot->open_seq.load(std::memory_order_relaxed) & ~uint64_t{1}) {}

  void Publish(int64_t step, int64_t since_ns, uint32_t code) noexcept {
    // Release stores keep the odd number ahead of every field, as PostControl does (TSan does
    // not model fences); each is a plain store on x86.
    slot_->open_seq.store(seq_ + 1, std::memory_order_relaxed);
    slot_->open_step.store(step, std::memory_order_release);
    slot_->open_since_ns.store(since_ns, std::memory_order_release);
    slot_->open_stage.store(code, std::memory_order_release);
    seq_ += 2;
    slot_->open_seq.store(seq_, std::memory_order_release);
  }

 private:
  v1::SlotHeader* slot_ = nullptr;
  uint64_t seq_ = 0;
};

// Clears the fields ("nothing published") under the lock, leaving the sequence even and
// larger than before: ClaimSlot calls it, since a previous owner may have died mid-write.
void ResetOpenStage(v1::SlotHeader& slot) noexcept;

// Reads a consistent copy into `*out`, retrying up to `attempts` times while the writer is
// mid-write. False if every attempt was torn (a writer busy at each try, or one that died
// mid-write and whose slot was not claimed again); `*out` is then unchanged.
bool ReadOpenStage(const v1::SlotHeader& slot, OpenStage* out, int attempts = 64) noexcept;

}  // namespace stagefrontier::shm

#endif  // STAGEFRONTIER_SHM_OPEN_STAGE_H_
