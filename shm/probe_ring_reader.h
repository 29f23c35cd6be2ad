// The consumer side of the probe rings (layout v2), used by the sidecar next to
// SegmentReader: drains each slot's probe ring, validates every record, and keeps counters.
//
// A record is delivered only if its sequence number is the one its position implies, its
// operation is known, and call <= start <= end with the collective shorter than a day;
// anything else is counted `invalid` (with a message) and skipped. Records are handed back
// to the producer as soon as they are read: probe intervals are evidence, not accounting, so
// a sidecar that dies between reading and sending loses at most one batch of them.
//
// Threading contract: one reader per segment (the sidecar holds the segment's reader lock);
// a ProbeRingReader object is used by one thread.
//
//   ProbeRingReader probes(view);
//   probes.Drain(local_rank, [](const ProbeInterval& p) { Attach(p); });
//   ProbeRingReport r = probes.Report(local_rank);  // producer, backend, watermark, drops
#ifndef STAGEFRONTIER_SHM_PROBE_RING_READER_H_
#define STAGEFRONTIER_SHM_PROBE_RING_READER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shm/probe_ring_writer.h"
#include "shm/segment_view.h"

namespace stagefrontier::shm {

struct ProbeRingReport {
  uint32_t local_rank = 0;
  uint32_t producer_pid = 0;  // 0: no probe feeds this ring
  uint32_t backend = 0;       // v2::ProbeBackend
  int64_t resolved_through_ns = 0;
  uint64_t records_read = 0;
  uint64_t invalid = 0;
  uint64_t dropped_full = 0;        // the producer found the ring full
  uint64_t dropped_unresolved = 0;  // events that never completed
  uint64_t collectives_seen = 0;
  std::string last_error;
};

class ProbeRingReader {
 public:
  // A view of a layout v1 segment has no probe rings: Drain delivers nothing.
  explicit ProbeRingReader(const SegmentView& view,
                           std::function<void(uint32_t, const std::string&)> on_error = nullptr);

  // Delivers at most `max_records` valid intervals of slot `local_rank` to `sink`, in ring
  // order, and frees their space. Returns the number delivered; never fails.
  size_t Drain(uint32_t local_rank, const std::function<void(const ProbeInterval&)>& sink,
               size_t max_records = 4096);
  // Whether a live producer feeds the ring of slot `local_rank`, and the time through which
  // it has published everything (meaningful only when fed).
  bool Fed(uint32_t local_rank) const;
  int64_t ResolvedThrough(uint32_t local_rank) const;
  ProbeRingReport Report(uint32_t local_rank) const;

 private:
  struct RingState {
    uint64_t records_read = 0;
    uint64_t invalid = 0;
    std::string last_error;
  };
  SegmentView view_;
  std::function<void(uint32_t, const std::string&)> on_error_;
  std::vector<RingState> rings_;
};

}  // namespace stagefrontier::shm

#endif  // STAGEFRONTIER_SHM_PROBE_RING_READER_H_
