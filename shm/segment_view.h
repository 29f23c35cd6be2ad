// A validated view of segment bytes: checks the header of a mapped segment (any bytes at all,
// from a file or a fuzzer) before anything inside it is touched, and gives typed access to
// its slots and records. No I/O; segment_file.h maps files.
//
// The geometry (version, slot count, ring capacities, offsets, job id) is copied out of the
// header once, when the view is opened, and never read from the shared bytes again: another
// process with write access may scribble over the header at any time, and every address this
// view computes must stay inside the bytes it validated.
//
//   absl::StatusOr<SegmentView> view = SegmentView::Open(base, size);
//   if (!view.ok()) return view.status();  // names what is wrong with the bytes
//   v1::SlotHeader& slot = view->slot(local_rank);
#ifndef STAGEFRONTIER_SHM_SEGMENT_VIEW_H_
#define STAGEFRONTIER_SHM_SEGMENT_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "shm/segment_layout_v1.h"
#include "shm/segment_layout_v2.h"

namespace stagefrontier::shm {

// The newest layout version this build reads and writes.
inline constexpr uint32_t kNewestLayoutVersion = v2::kLayoutVersion;

class SegmentView {
 public:
  // Validates `size` bytes at `base` (8-byte aligned, normally page aligned) as a segment:
  // magic, a known layout version (1 or 2), init flag, header, slot and probe geometry
  // consistent with each other and with `size`. Fails with
  //   DataLoss            bytes are not a segment (bad magic, zero-filled, truncated, bad geometry)
  //   FailedPrecondition  a layout version this build does not know, or initialization not
  //                       complete (creator crashed or still writing)
  // Never reads outside [base, base + size).
  [[nodiscard]] static absl::StatusOr<SegmentView> Open(void* base, size_t size);

  // Writes a fresh header and zeroed slots into `size` bytes at `base`, ending with the
  // release store of the init flag. probe_ring_capacity 0 writes layout v1 (no probe rings,
  // `size` = v1::SegmentBytes(slot_count, capacity)); otherwise layout v2 (`size` =
  // v2::SegmentBytes(slot_count, capacity, probe_ring_capacity)). InvalidArgument on a bad
  // geometry or size.
  [[nodiscard]] static absl::StatusOr<SegmentView> Initialize(void* base, size_t size,
                                                              const std::string& job_id,
                                                              uint32_t slot_count,
                                                              uint32_t ring_capacity,
                                                              uint32_t probe_ring_capacity = 0);

  // The live header, for fields that are information only (creator pid, creation time): its
  // geometry fields may have changed since the view was opened; use the accessors below.
  const v1::SegmentHeader& header() const { return *header_; }
  uint32_t layout_version() const { return version_; }
  uint32_t slot_count() const { return slot_count_; }
  uint32_t ring_capacity() const { return ring_capacity_; }
  // Bytes the geometry covers (the header's total_bytes when the view was opened).
  uint64_t total_bytes() const { return total_bytes_; }
  std::string job_id() const { return std::string(job_id_); }
  // True if the live header still holds the magic, version, geometry and job id this view was
  // opened with. False means someone wrote over it: the segment is not to be trusted.
  bool HeaderUnchanged() const;

  // Requires i < slot_count().
  v1::SlotHeader& slot(uint32_t i) const;
  // Record `cursor` (any value; it is reduced modulo the capacity) of slot i.
  v1::StepRecord& record(uint32_t i, uint64_t cursor) const;

  // Layout v2 only: whether the segment has probe rings, and slot i's ring (i < slot_count()).
  bool has_probe_rings() const { return probe_ring_capacity_ != 0; }
  uint32_t probe_ring_capacity() const { return probe_ring_capacity_; }
  v2::ProbeRingHeader& probe_ring(uint32_t i) const;
  // Probe record `cursor` (reduced modulo the probe capacity) of slot i.
  v2::ProbeRecord& probe_record(uint32_t i, uint64_t cursor) const;

 private:
  SegmentView(v1::SegmentHeader* header, char* base) : header_(header), base_(base) {}
  // Open's steps. Alignment, magic, a known layout version and room for the header: the
  // version.
  static absl::StatusOr<uint32_t> CheckIdentity(const void* base, size_t size);
  // The header's v1 geometry, each field copied out once, into this view.
  absl::Status ReadGeometry(const char* bytes);
  // Layout v2's probe rings; `expected` (the segment's size so far) grows by them.
  absl::Status ReadProbeGeometry(const char* bytes, uint64_t* expected);
  v1::SegmentHeader* header_;
  char* base_;
  // Copied from the header once (see the comment at the top).
  uint32_t version_ = 0;
  uint32_t slot_count_ = 0;
  uint32_t ring_capacity_ = 0;
  uint64_t slot_bytes_ = 0;
  uint64_t total_bytes_ = 0;
  uint64_t probe_offset_ = 0;
  uint32_t probe_ring_capacity_ = 0;  // 0 for layout v1
  uint64_t probe_slot_bytes_ = 0;
  char job_id_[v1::kJobIdBytes] = {};
};

// Checks the geometry a creator asks for: 1..kMaxSlots slots, a power-of-two capacity in
// [kMinRingCapacity, kMaxRingCapacity], a job id of 1..63 characters from [A-Za-z0-9_.-].
// Returns InvalidArgument naming the bad value.
[[nodiscard]] absl::Status ValidateGeometry(const std::string& job_id, uint32_t slot_count,
                                            uint32_t ring_capacity);
// Checks a probe ring capacity: 0 (no probe rings, layout v1) or a power of two in
// [kMinProbeRingCapacity, kMaxProbeRingCapacity]. Returns InvalidArgument naming the value.
[[nodiscard]] absl::Status ValidateProbeCapacity(uint32_t probe_ring_capacity);

}  // namespace stagefrontier::shm

#endif  // STAGEFRONTIER_SHM_SEGMENT_VIEW_H_
