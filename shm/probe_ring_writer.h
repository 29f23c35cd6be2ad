// The producer side of one slot's probe ring (layout v2): the collective probe's resolver
// thread, or a framework hook, publishes one interval per collective. Wait-free once
// claimed, no allocation, no system call.
//
// Threading contract: one producer per ring across all processes, enforced by Claim (a
// compare-and-swap of the ring's producer_pid); inside the producer, one thread at a time
// calls TryPublish / SetResolvedThrough. The reader (probe_ring_reader.h) runs in the sidecar.
// Records follow the step ring's protocol (seq 2*i+1 while written, 2*i+2 when complete, then
// a release store of the write cursor); a full ring drops and counts, never waits.
//
//   ProbeRingWriter writer;
//   if (writer.Claim(view, local_rank, v2::kProbeBackendCuda).ok()) {
//     writer.TryPublish(interval);          // false: counted in dropped_full
//     writer.SetResolvedThrough(now_ns);    // lets the sidecar send the steps before now_ns
//   }
#ifndef STAGEFRONTIER_SHM_PROBE_RING_WRITER_H_
#define STAGEFRONTIER_SHM_PROBE_RING_WRITER_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "shm/segment_view.h"

namespace stagefrontier::shm {

// One collective as the probe saw it, on the producer's CLOCK_MONOTONIC.
struct ProbeInterval {
  int64_t call_ns = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;
  uint64_t comm_id = 0;
  uint64_t collective_seq = 0;
  uint16_t op = 0;  // v2::CollectiveOp
  uint16_t flags = 0;
};

class ProbeRingWriter {
 public:
  ProbeRingWriter() = default;
  ~ProbeRingWriter() { Release(); }
  ProbeRingWriter(const ProbeRingWriter&) = delete;
  ProbeRingWriter& operator=(const ProbeRingWriter&) = delete;

  // Becomes the producer of slot `local_rank`'s probe ring. Fails with
  //   FailedPrecondition  the segment is layout v1 (no probe rings)
  //   OutOfRange          local_rank >= slot count
  //   AlreadyExists       a live process already produces into this ring
  // A ring whose producer died (kill(pid, 0) says ESRCH) is taken over.
  [[nodiscard]] absl::Status Claim(const SegmentView& view, uint32_t local_rank,
                                   v2::ProbeBackend backend);
  // Gives the ring back (producer_pid = 0). Published records stay readable.
  void Release() noexcept;
  bool claimed() const { return ring_ != nullptr; }

  // Publishes one interval. Returns false, counting it in dropped_full, if the ring is full
  // (or nothing is claimed).
  bool TryPublish(const ProbeInterval& interval) noexcept;
  // Every collective called before `t_ns` is now published or dropped.
  void SetResolvedThrough(int64_t t_ns) noexcept;
  // Counts calls the probe saw (sampled or not) and intervals lost to events that never
  // completed.
  void CountSeen() noexcept;
  void CountUnresolved() noexcept;

 private:
  v2::ProbeRingHeader* ring_ = nullptr;
  v2::ProbeRecord* records_ = nullptr;
  uint64_t mask_ = 0;
  uint64_t cached_read_ = 0;
  uint32_t pid_ = 0;
};

}  // namespace stagefrontier::shm

#endif  // STAGEFRONTIER_SHM_PROBE_RING_WRITER_H_
