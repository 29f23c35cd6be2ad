// The producer side of one slot's ring: wait-free, no system call, no allocation.
//
// Construct it after claiming the slot: it stamps records with the owner's schema hash and
// generation.
//
// Threading contract: exactly one thread of one process calls TryPublish for a slot at a time
// (the stub guarantees it by owning the slot); the reader (segment_reader.h) runs
// concurrently in another process. A record is written in place, its sequence number set to
// 2*i+2, then the write cursor is advanced with a release store. When the ring is full the
// record is dropped and counted: the writer never waits and never overwrites what the reader
// has not consumed.
//
//   RingWriter writer(view, local_rank);
//   if (!writer.TryPublish(step, end_ns, flags, boundaries, stage_count)) { /* counted drop */ }
#ifndef STAGEFRONTIER_SHM_RING_WRITER_H_
#define STAGEFRONTIER_SHM_RING_WRITER_H_

#include <atomic>
#include <cstdint>
#include <cstring>

#include "shm/segment_view.h"

namespace stagefrontier::shm {

namespace testing {
// Test-only crash point: when set, TryPublish calls it after writing half of a record (before
// publishing), so a test can SIGKILL a writer mid-record. Null in production.
inline std::atomic<void (*)()> mid_record_hook{nullptr};
}  // namespace testing

class RingWriter {
 public:
  RingWriter() = default;
  RingWriter(const SegmentView& view, uint32_t local_rank)
      : slot_(&view.slot(local_rank)),
        records_(&view.record(local_rank, 0)),
        mask_(view.ring_capacity() - 1),
        cached_read_(slot_->read_cursor.load(std::memory_order_acquire)),
        schema_hash_(slot_->schema_hash),
        generation_(static_cast<uint32_t>(slot_->generation.load(std::memory_order_relaxed))) {}

  // Publishes one step record. `boundaries` holds stage_count + 1 times (step start, then the
  // end of each stage); stage_count <= v1::kMaxStages. Returns false, counting the drop in the
  // slot, if the ring is full.
  bool TryPublish(int64_t step, int64_t end_ns, uint32_t flags, const int64_t* boundaries,
                  uint32_t stage_count) noexcept {
    const uint64_t w = slot_->write_cursor.load(std::memory_order_relaxed);
    if (w - cached_read_ > mask_) {
      // Looks full with the cached cursor; only now touch the reader's cache line.
      cached_read_ = slot_->read_cursor.load(std::memory_order_acquire);
      if (w - cached_read_ > mask_) {
        slot_->dropped_full.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    }
    v1::StepRecord& rec = records_[w & mask_];
    rec.seq.store(2 * w + 1, std::memory_order_relaxed);
    rec.step = step;
    rec.end_ns = end_ns;
    rec.flags = flags;
    rec.stage_count = stage_count;
    rec.schema_hash = schema_hash_;
    rec.generation = generation_;
    const size_t half = (stage_count + 1) / 2;
    std::memcpy(rec.boundaries_ns, boundaries, half * sizeof(int64_t));
    if (void (*hook)() = testing::mid_record_hook.load(std::memory_order_relaxed)) hook();
    std::memcpy(rec.boundaries_ns + half, boundaries + half,
                (stage_count + 1 - half) * sizeof(int64_t));
    rec.seq.store(2 * w + 2, std::memory_order_relaxed);
    slot_->write_cursor.store(w + 1, std::memory_order_release);
    return true;
  }

  // True if a record can be published now. For callers that may wait (tests, a final flush);
  // the stub never waits.
  bool HasRoom() noexcept {
    cached_read_ = slot_->read_cursor.load(std::memory_order_acquire);
    return slot_->write_cursor.load(std::memory_order_relaxed) - cached_read_ <= mask_;
  }

  // Records published by this slot since the segment was created, and dropped because full.
  uint64_t published() const { return slot_->write_cursor.load(std::memory_order_relaxed); }
  uint64_t dropped() const { return slot_->dropped_full.load(std::memory_order_relaxed); }

 private:
  v1::SlotHeader* slot_ = nullptr;
  v1::StepRecord* records_ = nullptr;
  uint64_t mask_ = 0;
  uint64_t cached_read_ = 0;
  uint64_t schema_hash_ = 0;
  uint32_t generation_ = 0;
};

}  // namespace stagefrontier::shm

#endif  // STAGEFRONTIER_SHM_RING_WRITER_H_
