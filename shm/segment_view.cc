#include "shm/segment_view.h"

#include <time.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "shm/monotonic_clock.h"
#include "shm/record_limits.h"

namespace stagefrontier::shm {
namespace {

bool IsPowerOfTwo(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

// Layout fields are read from untrusted bytes: copy each out once, then check it.
template <typename T>
T Load(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

absl::Status ValidateGeometry(const std::string& job_id, uint32_t slot_count,
                              uint32_t ring_capacity) {
  if (!ValidJobId(job_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job id \"", absl::CHexEscape(job_id.substr(0, 80)), "\" must have 1 to ",
                     kMaxJobIdChars, " characters from [A-Za-z0-9_.-], not starting with '.'"));
  }
  if (slot_count == 0 || slot_count > v1::kMaxSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot count ", slot_count, " is outside 1..", v1::kMaxSlots));
  }
  if (!IsPowerOfTwo(ring_capacity) || ring_capacity < v1::kMinRingCapacity ||
      ring_capacity > v1::kMaxRingCapacity) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring capacity ", ring_capacity, " must be a power of two in ",
                     v1::kMinRingCapacity, "..", v1::kMaxRingCapacity));
  }
  return absl::OkStatus();
}

absl::Status ValidateProbeCapacity(uint32_t probe_ring_capacity) {
  if (probe_ring_capacity == 0) return absl::OkStatus();
  if (!IsPowerOfTwo(probe_ring_capacity) || probe_ring_capacity < v2::kMinProbeRingCapacity ||
      probe_ring_capacity > v2::kMaxProbeRingCapacity) {
    return absl::InvalidArgumentError(absl::StrCat(
        "probe ring capacity ", probe_ring_capacity, " must be 0 or a power of two in ",
        v2::kMinProbeRingCapacity, "..", v2::kMaxProbeRingCapacity));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> SegmentView::CheckIdentity(const void* base, size_t size) {
  const char* bytes = static_cast<const char*>(base);
  if (base == nullptr || reinterpret_cast<uintptr_t>(base) % 8 != 0) {
    return absl::InvalidArgumentError("segment bytes must be 8-byte aligned");
  }
  // Magic and version first, so that a newer layout is refused before its size is judged.
  auto too_short = [size] {
    return absl::DataLossError(
        absl::StrCat("segment is ", size, " bytes, too short for a header: truncated"));
  };
  if (size < 8) return too_short();
  const uint64_t magic = Load<uint64_t>(bytes + offsetof(v1::SegmentHeader, magic));
  if (magic != v1::kMagic) {
    return absl::DataLossError(absl::StrCat(
        "not a StageFrontier segment: magic 0x", absl::Hex(magic, absl::kZeroPad16),
        magic == 0 ? " (zero-filled: creator crashed before writing, or not a segment)" : ""));
  }
  if (size < 12) return too_short();
  const uint32_t version = Load<uint32_t>(bytes + offsetof(v1::SegmentHeader, layout_version));
  if (version != v1::kLayoutVersion && version != v2::kLayoutVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("segment layout version ", version, " is ",
                     version > kNewestLayoutVersion ? "newer than" : "not one of",
                     " the versions this build "
                     "knows (1..",
                     kNewestLayoutVersion, "); upgrade StageFrontier or remove the segment"));
  }
  if (size < v1::kHeaderBytes) {
    return absl::DataLossError(
        absl::StrCat("segment is ", size, " bytes, shorter than its 4096-byte header: truncated"));
  }
  return version;
}

absl::Status SegmentView::ReadGeometry(const char* bytes) {
  const uint32_t header_bytes = Load<uint32_t>(bytes + offsetof(v1::SegmentHeader, header_bytes));
  const uint64_t slots_offset = Load<uint64_t>(bytes + offsetof(v1::SegmentHeader, slots_offset));
  if (header_bytes != v1::kHeaderBytes || slots_offset != v1::kHeaderBytes) {
    return absl::DataLossError(absl::StrCat("segment header size ", header_bytes,
                                            " / slots offset ", slots_offset,
                                            " differ from layout v1's 4096"));
  }
  const uint32_t record_bytes = Load<uint32_t>(bytes + offsetof(v1::SegmentHeader, record_bytes));
  const uint32_t max_stages = Load<uint32_t>(bytes + offsetof(v1::SegmentHeader, max_stages));
  if (record_bytes != sizeof(v1::StepRecord) || max_stages != v1::kMaxStages) {
    return absl::DataLossError(absl::StrCat("segment record size ", record_bytes, " / max stages ",
                                            max_stages, " differ from layout v1's 320 / 32"));
  }
  std::memcpy(job_id_, bytes + offsetof(v1::SegmentHeader, job_id), sizeof(job_id_));
  const size_t job_len = strnlen(job_id_, sizeof(job_id_));
  if (job_len == sizeof(job_id_)) {
    return absl::DataLossError("segment job id is not NUL-terminated");
  }
  slot_count_ = Load<uint32_t>(bytes + offsetof(v1::SegmentHeader, slot_count));
  ring_capacity_ = Load<uint32_t>(bytes + offsetof(v1::SegmentHeader, ring_capacity));
  if (absl::Status s = ValidateGeometry(std::string(job_id_, job_len), slot_count_, ring_capacity_);
      !s.ok()) {
    return absl::DataLossError(absl::StrCat("segment header is corrupt: ", s.message()));
  }
  slot_bytes_ = Load<uint64_t>(bytes + offsetof(v1::SegmentHeader, slot_bytes));
  if (slot_bytes_ != v1::SlotBytes(ring_capacity_)) {
    return absl::DataLossError(absl::StrCat("segment slot size ", slot_bytes_,
                                            " does not match its ring capacity ", ring_capacity_));
  }
  return absl::OkStatus();
}

absl::Status SegmentView::ReadProbeGeometry(const char* bytes, uint64_t* expected) {
  const char* g = bytes + v2::kProbeGeometryOffset;
  const uint32_t cap = Load<uint32_t>(g + offsetof(v2::ProbeGeometry, probe_ring_capacity));
  if (cap == 0 || !ValidateProbeCapacity(cap).ok()) {
    return absl::DataLossError(absl::StrCat("segment probe ring capacity ", cap,
                                            " is not a power of two in ", v2::kMinProbeRingCapacity,
                                            "..", v2::kMaxProbeRingCapacity));
  }
  const uint32_t probe_record_bytes =
      Load<uint32_t>(g + offsetof(v2::ProbeGeometry, probe_record_bytes));
  probe_slot_bytes_ = Load<uint64_t>(g + offsetof(v2::ProbeGeometry, probe_slot_bytes));
  probe_offset_ = Load<uint64_t>(g + offsetof(v2::ProbeGeometry, probe_offset));
  if (probe_record_bytes != sizeof(v2::ProbeRecord) ||
      probe_slot_bytes_ != v2::ProbeSlotBytes(cap) || probe_offset_ != *expected) {
    return absl::DataLossError(absl::StrCat(
        "segment probe geometry (offset ", probe_offset_, ", record ", probe_record_bytes,
        " bytes, slot ", probe_slot_bytes_, " bytes) differs from layout v2's for capacity ", cap));
  }
  probe_ring_capacity_ = cap;
  *expected = v2::SegmentBytes(slot_count_, ring_capacity_, cap);
  return absl::OkStatus();
}

absl::StatusOr<SegmentView> SegmentView::Open(void* base, size_t size) {
  const absl::StatusOr<uint32_t> version = CheckIdentity(base, size);
  if (!version.ok()) return version.status();
  auto* header = static_cast<v1::SegmentHeader*>(base);
  if (header->init_complete.load(std::memory_order_acquire) != v1::kInitComplete) {
    return absl::FailedPreconditionError(
        "segment initialization is not complete (its creator crashed or is still writing)");
  }
  // Every geometry field is copied out once and judged on the copy: the bytes may change
  // while we look at them.
  const char* bytes = static_cast<const char*>(base);
  SegmentView view(header, static_cast<char*>(base));
  view.version_ = *version;
  if (absl::Status s = view.ReadGeometry(bytes); !s.ok()) return s;
  uint64_t expected = v1::SegmentBytes(view.slot_count_, view.ring_capacity_);
  if (*version == v2::kLayoutVersion) {
    if (absl::Status s = view.ReadProbeGeometry(bytes, &expected); !s.ok()) return s;
  }
  view.total_bytes_ = Load<uint64_t>(bytes + offsetof(v1::SegmentHeader, total_bytes));
  if (view.total_bytes_ != expected) {
    return absl::DataLossError(absl::StrCat("segment header says ", view.total_bytes_,
                                            " bytes but its geometry needs ", expected));
  }
  if (size < expected) {
    return absl::DataLossError(
        absl::StrCat("segment is ", size, " bytes but its header says ", expected, ": truncated"));
  }
  return view;
}

bool SegmentView::HeaderUnchanged() const {
  const char* bytes = base_;
  if (Load<uint64_t>(bytes + offsetof(v1::SegmentHeader, magic)) != v1::kMagic ||
      Load<uint32_t>(bytes + offsetof(v1::SegmentHeader, layout_version)) != version_ ||
      Load<uint32_t>(bytes + offsetof(v1::SegmentHeader, slot_count)) != slot_count_ ||
      Load<uint32_t>(bytes + offsetof(v1::SegmentHeader, ring_capacity)) != ring_capacity_ ||
      Load<uint64_t>(bytes + offsetof(v1::SegmentHeader, slot_bytes)) != slot_bytes_ ||
      Load<uint64_t>(bytes + offsetof(v1::SegmentHeader, total_bytes)) != total_bytes_ ||
      std::memcmp(bytes + offsetof(v1::SegmentHeader, job_id), job_id_, sizeof(job_id_)) != 0) {
    return false;
  }
  if (probe_ring_capacity_ == 0) return true;
  const char* g = bytes + v2::kProbeGeometryOffset;
  return Load<uint32_t>(g + offsetof(v2::ProbeGeometry, probe_ring_capacity)) ==
             probe_ring_capacity_ &&
         Load<uint64_t>(g + offsetof(v2::ProbeGeometry, probe_offset)) == probe_offset_ &&
         Load<uint64_t>(g + offsetof(v2::ProbeGeometry, probe_slot_bytes)) == probe_slot_bytes_;
}

absl::StatusOr<SegmentView> SegmentView::Initialize(void* base, size_t size,
                                                    const std::string& job_id, uint32_t slot_count,
                                                    uint32_t ring_capacity,
                                                    uint32_t probe_ring_capacity) {
  if (absl::Status s = ValidateGeometry(job_id, slot_count, ring_capacity); !s.ok()) return s;
  if (absl::Status s = ValidateProbeCapacity(probe_ring_capacity); !s.ok()) return s;
  const uint64_t total = probe_ring_capacity == 0
                             ? v1::SegmentBytes(slot_count, ring_capacity)
                             : v2::SegmentBytes(slot_count, ring_capacity, probe_ring_capacity);
  if (size != total) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment buffer is ", size, " bytes, geometry needs ", total));
  }
  std::memset(base, 0, size);
  auto* header = new (base) v1::SegmentHeader();
  header->magic = v1::kMagic;
  header->layout_version = probe_ring_capacity == 0 ? v1::kLayoutVersion : v2::kLayoutVersion;
  header->header_bytes = v1::kHeaderBytes;
  header->total_bytes = total;
  header->creation_time_unix_ns = RealtimeNowNs();
  header->creator_pid = static_cast<uint32_t>(getpid());
  header->slot_count = slot_count;
  header->slot_bytes = v1::SlotBytes(ring_capacity);
  header->ring_capacity = ring_capacity;
  header->record_bytes = sizeof(v1::StepRecord);
  header->max_stages = v1::kMaxStages;
  std::memcpy(header->job_id, job_id.data(), job_id.size());
  header->slots_offset = v1::kHeaderBytes;
  v2::ProbeGeometry* probe = nullptr;
  if (probe_ring_capacity != 0) {
    probe = new (static_cast<char*>(base) + v2::kProbeGeometryOffset) v2::ProbeGeometry();
    probe->probe_offset = v1::SegmentBytes(slot_count, ring_capacity);
    probe->probe_ring_capacity = probe_ring_capacity;
    probe->probe_record_bytes = sizeof(v2::ProbeRecord);
    probe->probe_slot_bytes = v2::ProbeSlotBytes(probe_ring_capacity);
  }
  SegmentView view(header, static_cast<char*>(base));
  view.version_ = header->layout_version;
  view.slot_count_ = slot_count;
  view.ring_capacity_ = ring_capacity;
  view.slot_bytes_ = header->slot_bytes;
  view.total_bytes_ = total;
  std::memcpy(view.job_id_, header->job_id, sizeof(view.job_id_));
  if (probe != nullptr) {
    view.probe_offset_ = probe->probe_offset;
    view.probe_ring_capacity_ = probe_ring_capacity;
    view.probe_slot_bytes_ = probe->probe_slot_bytes;
  }
  for (uint32_t i = 0; i < slot_count; ++i) {
    new (&view.slot(i)) v1::SlotHeader();
    for (uint32_t r = 0; r < ring_capacity; ++r) new (&view.record(i, r)) v1::StepRecord();
    if (probe_ring_capacity == 0) continue;
    new (&view.probe_ring(i)) v2::ProbeRingHeader();
    for (uint32_t r = 0; r < probe_ring_capacity; ++r) {
      new (&view.probe_record(i, r)) v2::ProbeRecord();
    }
  }
  header->init_complete.store(v1::kInitComplete, std::memory_order_release);
  return view;
}

v1::SlotHeader& SegmentView::slot(uint32_t i) const {
  return *reinterpret_cast<v1::SlotHeader*>(base_ + v1::kHeaderBytes + i * slot_bytes_);
}

v1::StepRecord& SegmentView::record(uint32_t i, uint64_t cursor) const {
  char* ring = reinterpret_cast<char*>(&slot(i)) + sizeof(v1::SlotHeader);
  return reinterpret_cast<v1::StepRecord*>(ring)[cursor & (ring_capacity_ - 1)];
}

v2::ProbeRingHeader& SegmentView::probe_ring(uint32_t i) const {
  return *reinterpret_cast<v2::ProbeRingHeader*>(base_ + probe_offset_ + i * probe_slot_bytes_);
}

v2::ProbeRecord& SegmentView::probe_record(uint32_t i, uint64_t cursor) const {
  char* ring = reinterpret_cast<char*>(&probe_ring(i)) + sizeof(v2::ProbeRingHeader);
  return reinterpret_cast<v2::ProbeRecord*>(ring)[cursor & (probe_ring_capacity_ - 1)];
}

}  // namespace stagefrontier::shm
