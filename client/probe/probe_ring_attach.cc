#include "client/probe/probe_ring_attach.h"

namespace stagefrontier::probe {

absl::StatusOr<AttachedProbeRing> AttachProbeRing(const LauncherIdentity& identity,
                                                  shm::v2::ProbeBackend backend) {
  absl::StatusOr<std::unique_ptr<shm::MappedSegment>> seg =
      shm::MappedSegment::OpenOrCreate(SegmentOptionsFor(identity));
  if (!seg.ok()) return seg.status();
  AttachedProbeRing out;
  out.segment = std::move(*seg);
  out.local_rank = static_cast<uint32_t>(identity.local_rank);
  out.writer = std::make_unique<shm::ProbeRingWriter>();
  if (absl::Status s = out.writer->Claim(out.segment->view(), out.local_rank, backend); !s.ok()) {
    return s;
  }
  return out;
}

}  // namespace stagefrontier::probe
