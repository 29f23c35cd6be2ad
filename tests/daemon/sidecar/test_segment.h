// Segments for the sidecar's tests: a real segment file, and the identity a three-stage
// trainer claims its slot with.
//
//   auto seg = NewSegment(dir, "jobx", /*slots=*/2);
//   REQUIRE(shm::ClaimSlot((*seg)->view(), /*local_rank=*/1, ThreeStages(5, 8, 2)).ok());
#ifndef STAGEFRONTIER_TESTS_DAEMON_SIDECAR_TEST_SEGMENT_H_
#define STAGEFRONTIER_TESTS_DAEMON_SIDECAR_TEST_SEGMENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "shm/segment_file.h"
#include "shm/slot_ownership.h"

namespace stagefrontier {

// A segment of `slots` slots of 16 records for `job` in `dir`.
inline absl::StatusOr<std::unique_ptr<shm::MappedSegment>> NewSegment(const std::string& dir,
                                                                      const std::string& job,
                                                                      uint32_t slots) {
  shm::SegmentOptions so;
  so.dir = dir;
  so.job_id = job;
  so.slot_count = slots;
  so.ring_capacity = 16;
  return shm::MappedSegment::OpenOrCreate(so);
}

// Rank `rank` of `world`, `local_world` ranks on its node, stages data (io), fwd (compute) and
// sync (sync).
inline shm::SlotIdentity ThreeStages(int32_t rank, int32_t world, int32_t local_world) {
  shm::SlotIdentity id;
  id.rank = rank;
  id.world_size = world;
  id.local_world_size = local_world;
  id.stages = {{"data", 0}, {"fwd", 1}, {"sync", 2}};
  return id;
}

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_TESTS_DAEMON_SIDECAR_TEST_SEGMENT_H_
