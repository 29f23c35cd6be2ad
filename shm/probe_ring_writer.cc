#include "shm/probe_ring_writer.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "shm/slot_ownership.h"

namespace stagefrontier::shm {

absl::Status ProbeRingWriter::Claim(const SegmentView& view, uint32_t local_rank,
                                    v2::ProbeBackend backend) {
  Release();
  if (!view.has_probe_rings()) {
    return absl::FailedPreconditionError(
        "the segment has layout version 1, without probe rings: restart the job with a "
        "StageFrontier that creates layout 2 (remove the old segment)");
  }
  if (local_rank >= view.slot_count()) {
    return absl::OutOfRangeError(
        absl::StrCat("local rank ", local_rank, " has no slot (", view.slot_count(), " slots)"));
  }
  v2::ProbeRingHeader& ring = view.probe_ring(local_rank);
  const uint32_t pid = static_cast<uint32_t>(getpid());
  uint32_t current = ring.producer_pid.load(std::memory_order_acquire);
  while (true) {
    // This process already feeding it (libsfprobe preloaded and stagefrontier.torch's comm
    // hook, say) is refused too: the ring has one producer, and two in one process would race
    // on its cursor.
    if (current == pid) {
      return absl::AlreadyExistsError(absl::StrCat("the probe ring of local rank ", local_rank,
                                                   " is fed by this process (", pid,
                                                   ") already: one producer per ring"));
    }
    if (current != 0 && ProcessExists(current)) {
      return absl::AlreadyExistsError(absl::StrCat("the probe ring of local rank ", local_rank,
                                                   " is fed by process ", current));
    }
    if (ring.producer_pid.compare_exchange_weak(current, pid, std::memory_order_acq_rel)) break;
  }
  ring.backend.store(backend, std::memory_order_relaxed);
  ring_ = &ring;
  records_ = &view.probe_record(local_rank, 0);
  mask_ = view.probe_ring_capacity() - 1;
  cached_read_ = ring.read_cursor.load(std::memory_order_acquire);
  pid_ = pid;
  return absl::OkStatus();
}

void ProbeRingWriter::Release() noexcept {
  if (ring_ == nullptr) return;
  uint32_t expected = pid_;
  ring_->producer_pid.compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
  ring_ = nullptr;
}

bool ProbeRingWriter::TryPublish(const ProbeInterval& in) noexcept {
  if (ring_ == nullptr) return false;
  const uint64_t w = ring_->write_cursor.load(std::memory_order_relaxed);
  if (w - cached_read_ > mask_) {
    cached_read_ = ring_->read_cursor.load(std::memory_order_acquire);
    if (w - cached_read_ > mask_) {
      ring_->dropped_full.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  }
  v2::ProbeRecord& rec = records_[w & mask_];
  rec.seq.store(2 * w + 1, std::memory_order_relaxed);
  rec.call_ns = in.call_ns;
  rec.start_ns = in.start_ns;
  rec.end_ns = in.end_ns;
  rec.bytes = in.bytes;
  rec.comm_id = in.comm_id;
  rec.collective_seq = in.collective_seq;
  rec.op = in.op;
  rec.flags = in.flags;
  rec.seq.store(2 * w + 2, std::memory_order_release);
  ring_->write_cursor.store(w + 1, std::memory_order_release);
  return true;
}

void ProbeRingWriter::SetResolvedThrough(int64_t t_ns) noexcept {
  if (ring_ != nullptr) ring_->resolved_through_ns.store(t_ns, std::memory_order_release);
}

void ProbeRingWriter::CountSeen() noexcept {
  if (ring_ != nullptr) ring_->collectives_seen.fetch_add(1, std::memory_order_relaxed);
}

void ProbeRingWriter::CountUnresolved() noexcept {
  if (ring_ != nullptr) ring_->dropped_unresolved.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace stagefrontier::shm
