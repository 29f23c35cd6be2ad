// `stagefrontier segment`: looks into a node's shared-memory segment without a sidecar.
// Prints the header and every slot (owner, health, schema, counters) and can drain the rings
// into a recorded run (docs/run-format.md) that `stagefrontier analyze` accepts.
//
//   absl::StatusOr<SegmentSummary> s = InspectSegment("/dev/shm/stagefrontier.job.seg",
//                                                     /*drain_to=*/&out_stream);
//   std::cout << RenderSegmentText(*s);
#ifndef STAGEFRONTIER_DAEMON_ANALYZE_SEGMENT_INSPECT_H_
#define STAGEFRONTIER_DAEMON_ANALYZE_SEGMENT_INSPECT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shm/segment_reader.h"

namespace stagefrontier {

// Where a slot's rank is (docs/segment-format.md "Open stage"), read when inspected.
struct SlotOpenStage {
  bool readable = true;  // false: a write in progress at every try (or a writer died in it)
  bool known = false;    // false: nothing published (an older stub, or no step yet)
  bool between_steps = false;
  int64_t step = 0;
  std::string stage;   // the stage's name; "" between steps or for an index off the schema
  int64_t age_ns = 0;  // how long it has been open, on this node's monotonic clock
  // The slot's exit_reason (shm::v1::ExitReasonName): "" none said, "exception", "invalid".
  std::string exit_reason;
};

struct SegmentSummary {
  std::string path;
  std::string job_id;
  uint32_t layout_version = 0;
  int64_t creation_time_unix_ns = 0;
  uint32_t creator_pid = 0;
  uint32_t slot_count = 0;
  uint32_t ring_capacity = 0;
  uint32_t probe_ring_capacity = 0;  // 0: layout v1, no probe rings
  uint64_t total_bytes = 0;
  std::vector<shm::SlotReport> slots;  // claimed slots only
  std::vector<SlotOpenStage> open;     // one per entry of `slots`
  uint64_t drained = 0;                // records written to the run, if draining
  std::vector<std::string> errors;     // torn / invalid records met while draining
};

// Attaches to the segment at `path`. With `drain_to`, takes the reader lock (fails with
// ResourceExhausted if a sidecar holds it), drains every ring and writes one run record per
// step. Fails with the attach error (NotFound, DataLoss, FailedPrecondition, ...).
[[nodiscard]] absl::StatusOr<SegmentSummary> InspectSegment(const std::string& path,
                                                            std::ostream* drain_to);

std::string RenderSegmentText(const SegmentSummary& s);
std::string RenderSegmentJson(const SegmentSummary& s);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ANALYZE_SEGMENT_INSPECT_H_
