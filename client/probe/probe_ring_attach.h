// Opens this process's probe ring: the launcher environment says which node segment and
// which slot (LOCAL_RANK); the segment is opened, or created if the stub has not yet, and
// the slot's probe ring claimed. Used by the NCCL probe and by framework hooks (the PyTorch
// DDP comm hook through the Python module) so that both feed the same ring the same way.
//
//   absl::StatusOr<LauncherIdentity> id = ResolveIdentity(ClientOptions{}, ::getenv);
//   absl::StatusOr<AttachedProbeRing> ring = AttachProbeRing(*id, v2::kProbeBackendCommHook);
//   if (ring.ok()) ring->writer->TryPublish(interval);
#ifndef STAGEFRONTIER_CLIENT_PROBE_PROBE_RING_ATTACH_H_
#define STAGEFRONTIER_CLIENT_PROBE_PROBE_RING_ATTACH_H_

#include <memory>

#include "absl/status/statusor.h"
#include "client/launcher_environment.h"
#include "shm/probe_ring_writer.h"
#include "shm/segment_file.h"

namespace stagefrontier::probe {

struct AttachedProbeRing {
  std::unique_ptr<shm::MappedSegment> segment;
  std::unique_ptr<shm::ProbeRingWriter> writer;  // claimed
  uint32_t local_rank = 0;
};

// Attaches the probe ring of `identity`'s slot. Fails as MappedSegment::OpenOrCreate (the
// segment) or ProbeRingWriter::Claim (layout v1, or another live producer on this ring).
[[nodiscard]] absl::StatusOr<AttachedProbeRing> AttachProbeRing(const LauncherIdentity& identity,
                                                                shm::v2::ProbeBackend backend);

}  // namespace stagefrontier::probe

#endif  // STAGEFRONTIER_CLIENT_PROBE_PROBE_RING_ATTACH_H_
