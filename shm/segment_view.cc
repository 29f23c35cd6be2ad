#include "shm/segment_view.h"

#include <time.h>
#include <unistd.h>

#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stagefrontier::shm {
namespace {

bool IsPowerOfTwo(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

bool ValidJobIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

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
  if (job_id.empty() || job_id.size() >= v1::kJobIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("job id \"", job_id, "\" must have 1 to ",
                                                   v1::kJobIdBytes - 1, " characters"));
  }
  for (char c : job_id) {
    if (!ValidJobIdChar(c)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job id \"", job_id, "\" may only contain letters, digits, '_', '.' and '-'"));
    }
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

absl::StatusOr<SegmentView> SegmentView::Open(void* base, size_t size) {
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
  auto* header = static_cast<v1::SegmentHeader*>(base);
  if (header->init_complete.load(std::memory_order_acquire) != v1::kInitComplete) {
    return absl::FailedPreconditionError(
        "segment initialization is not complete (its creator crashed or is still writing)");
  }
  if (header->header_bytes != v1::kHeaderBytes || header->slots_offset != v1::kHeaderBytes) {
    return absl::DataLossError(absl::StrCat("segment header size ", header->header_bytes,
                                            " / slots offset ", header->slots_offset,
                                            " differ from layout v1's 4096"));
  }
  if (header->record_bytes != sizeof(v1::StepRecord) || header->max_stages != v1::kMaxStages) {
    return absl::DataLossError(absl::StrCat("segment record size ", header->record_bytes,
                                            " / max stages ", header->max_stages,
                                            " differ from layout v1's 320 / 32"));
  }
  char job[v1::kJobIdBytes];
  std::memcpy(job, header->job_id, sizeof(job));
  const size_t job_len = strnlen(job, sizeof(job));
  if (job_len == sizeof(job)) return absl::DataLossError("segment job id is not NUL-terminated");
  if (absl::Status s =
          ValidateGeometry(std::string(job, job_len), header->slot_count, header->ring_capacity);
      !s.ok()) {
    return absl::DataLossError(absl::StrCat("segment header is corrupt: ", s.message()));
  }
  if (header->slot_bytes != v1::SlotBytes(header->ring_capacity)) {
    return absl::DataLossError(absl::StrCat("segment slot size ", header->slot_bytes,
                                            " does not match its ring capacity ",
                                            header->ring_capacity));
  }
  uint64_t expected = v1::SegmentBytes(header->slot_count, header->ring_capacity);
  const v2::ProbeGeometry* probe = nullptr;
  if (version == v2::kLayoutVersion) {
    probe = reinterpret_cast<const v2::ProbeGeometry*>(bytes + v2::kProbeGeometryOffset);
    const uint32_t cap = probe->probe_ring_capacity;
    if (cap == 0 || !ValidateProbeCapacity(cap).ok()) {
      return absl::DataLossError(
          absl::StrCat("segment probe ring capacity ", cap, " is not a power of two in ",
                       v2::kMinProbeRingCapacity, "..", v2::kMaxProbeRingCapacity));
    }
    if (probe->probe_record_bytes != sizeof(v2::ProbeRecord) ||
        probe->probe_slot_bytes != v2::ProbeSlotBytes(cap) || probe->probe_offset != expected) {
      return absl::DataLossError(
          absl::StrCat("segment probe geometry (offset ", probe->probe_offset, ", record ",
                       probe->probe_record_bytes, " bytes, slot ", probe->probe_slot_bytes,
                       " bytes) differs from layout v2's for capacity ", cap));
    }
    expected = v2::SegmentBytes(header->slot_count, header->ring_capacity, cap);
  }
  if (header->total_bytes != expected) {
    return absl::DataLossError(absl::StrCat("segment header says ", header->total_bytes,
                                            " bytes but its geometry needs ", expected));
  }
  if (size < expected) {
    return absl::DataLossError(
        absl::StrCat("segment is ", size, " bytes but its header says ", expected, ": truncated"));
  }
  return SegmentView(header, static_cast<char*>(base), probe);
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
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  header->creation_time_unix_ns = int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
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
  SegmentView view(header, static_cast<char*>(base), probe);
  for (uint32_t i = 0; i < slot_count; ++i) {
    new (&view.slot(i)) v1::SlotHeader();
    for (uint32_t r = 0; r < ring_capacity; ++r) new (&view.record(i, r)) v1::StepRecord();
    if (probe == nullptr) continue;
    new (&view.probe_ring(i)) v2::ProbeRingHeader();
    for (uint32_t r = 0; r < probe_ring_capacity; ++r) {
      new (&view.probe_record(i, r)) v2::ProbeRecord();
    }
  }
  header->init_complete.store(v1::kInitComplete, std::memory_order_release);
  return view;
}

std::string SegmentView::job_id() const {
  return std::string(header_->job_id, strnlen(header_->job_id, v1::kJobIdBytes));
}

v1::SlotHeader& SegmentView::slot(uint32_t i) const {
  return *reinterpret_cast<v1::SlotHeader*>(base_ + v1::kHeaderBytes + i * header_->slot_bytes);
}

v1::StepRecord& SegmentView::record(uint32_t i, uint64_t cursor) const {
  char* ring = reinterpret_cast<char*>(&slot(i)) + sizeof(v1::SlotHeader);
  return reinterpret_cast<v1::StepRecord*>(ring)[cursor & (header_->ring_capacity - 1)];
}

v2::ProbeRingHeader& SegmentView::probe_ring(uint32_t i) const {
  return *reinterpret_cast<v2::ProbeRingHeader*>(base_ + probe_->probe_offset +
                                                 i * probe_->probe_slot_bytes);
}

v2::ProbeRecord& SegmentView::probe_record(uint32_t i, uint64_t cursor) const {
  char* ring = reinterpret_cast<char*>(&probe_ring(i)) + sizeof(v2::ProbeRingHeader);
  return reinterpret_cast<v2::ProbeRecord*>(ring)[cursor & (probe_->probe_ring_capacity - 1)];
}

}  // namespace stagefrontier::shm
