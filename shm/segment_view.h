// A validated view of segment bytes: checks the header of a mapped segment (any bytes at all,
// from a file or a fuzzer) before anything inside it is touched, and gives typed access to
// its slots and records. No I/O; segment_file.h maps files.
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

namespace stagefrontier::shm {

// The newest layout version this build reads and writes.
inline constexpr uint32_t kNewestLayoutVersion = v1::kLayoutVersion;

class SegmentView {
 public:
  // Validates `size` bytes at `base` (8-byte aligned, normally page aligned) as a segment:
  // magic, a known layout version, init flag, header and slot geometry consistent with each
  // other and with `size`. Fails with
  //   DataLoss            bytes are not a segment (bad magic, zero-filled, truncated, bad geometry)
  //   FailedPrecondition  a layout version this build does not know, or initialization not
  //                       complete (creator crashed or still writing)
  // Never reads outside [base, base + size).
  [[nodiscard]] static absl::StatusOr<SegmentView> Open(void* base, size_t size);

  // Writes a fresh v1 header and zeroed slots into `size` bytes at `base`, ending with the
  // release store of the init flag. `size` must equal v1::SegmentBytes(slot_count, capacity).
  [[nodiscard]] static absl::StatusOr<SegmentView> Initialize(void* base, size_t size,
                                                              const std::string& job_id,
                                                              uint32_t slot_count,
                                                              uint32_t ring_capacity);

  const v1::SegmentHeader& header() const { return *header_; }
  uint32_t slot_count() const { return header_->slot_count; }
  uint32_t ring_capacity() const { return header_->ring_capacity; }
  std::string job_id() const;

  // Requires i < slot_count().
  v1::SlotHeader& slot(uint32_t i) const;
  // Record `cursor` (any value; it is reduced modulo the capacity) of slot i.
  v1::StepRecord& record(uint32_t i, uint64_t cursor) const;

 private:
  SegmentView(v1::SegmentHeader* header, char* base) : header_(header), base_(base) {}
  v1::SegmentHeader* header_;
  char* base_;
};

// Checks the geometry a creator asks for: 1..kMaxSlots slots, a power-of-two capacity in
// [kMinRingCapacity, kMaxRingCapacity], a job id of 1..63 characters from [A-Za-z0-9_.-].
// Returns InvalidArgument naming the bad value.
[[nodiscard]] absl::Status ValidateGeometry(const std::string& job_id, uint32_t slot_count,
                                            uint32_t ring_capacity);

}  // namespace stagefrontier::shm

#endif  // STAGEFRONTIER_SHM_SEGMENT_VIEW_H_
