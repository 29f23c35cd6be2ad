#include "shm/probe_ring_reader.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "shm/record_limits.h"
#include "shm/slot_ownership.h"

namespace stagefrontier::shm {
ProbeRingReader::ProbeRingReader(const SegmentView& view,
                                 std::function<void(uint32_t, const std::string&)> on_error)
    : view_(view),
      on_error_(std::move(on_error)),
      rings_(view.has_probe_rings() ? view.slot_count() : 0) {}

size_t ProbeRingReader::Drain(uint32_t local_rank,
                              const std::function<void(const ProbeInterval&)>& sink,
                              size_t max_records) {
  if (local_rank >= rings_.size()) return 0;
  v2::ProbeRingHeader& ring = view_.probe_ring(local_rank);
  RingState& st = rings_[local_rank];
  const uint64_t capacity = view_.probe_ring_capacity();
  uint64_t r = ring.read_cursor.load(std::memory_order_relaxed);
  const uint64_t w = ring.write_cursor.load(std::memory_order_acquire);
  auto fail = [&](std::string message) {
    ++st.invalid;
    st.last_error = absl::StrCat("probe ring of local rank ", local_rank, ": ", message);
    if (on_error_) on_error_(local_rank, st.last_error);
  };
  if (w < r || w - r > capacity) {
    // Corrupt cursors: skip to the writer's position rather than read garbage forever.
    fail(absl::StrCat("write cursor ", w, " is not within one ring of read cursor ", r));
    ring.read_cursor.store(w, std::memory_order_release);
    return 0;
  }
  size_t delivered = 0;
  for (; r < w && delivered < max_records; ++r) {
    const v2::ProbeRecord& rec = view_.probe_record(local_rank, r);
    const uint64_t seq = rec.seq.load(std::memory_order_acquire);
    ProbeInterval p;
    p.call_ns = rec.call_ns;
    p.start_ns = rec.start_ns;
    p.end_ns = rec.end_ns;
    p.bytes = rec.bytes;
    p.comm_id = rec.comm_id;
    p.collective_seq = rec.collective_seq;
    p.op = rec.op;
    p.flags = rec.flags;
    if (seq != 2 * r + 2) {
      fail(absl::StrCat("record ", r, " has sequence ", seq, ", expected ", 2 * r + 2));
      continue;
    }
    if (p.op >= v2::kOpCount) {
      fail(absl::StrCat("record ", r, " has unknown operation ", p.op));
      continue;
    }
    // call_ns >= 0 first, so that end - call cannot overflow.
    if (p.call_ns < 0 || p.call_ns > p.start_ns || p.start_ns > p.end_ns ||
        p.end_ns - p.call_ns > kMaxStageNs) {
      fail(absl::StrCat("record ", r, " has times out of order or implausible: call ", p.call_ns,
                        ", start ", p.start_ns, ", end ", p.end_ns));
      continue;
    }
    ++st.records_read;
    ++delivered;
    sink(p);
  }
  ring.read_cursor.store(r, std::memory_order_release);
  return delivered;
}

bool ProbeRingReader::Fed(uint32_t local_rank) const {
  if (local_rank >= rings_.size()) return false;
  return ProcessExists(view_.probe_ring(local_rank).producer_pid.load(std::memory_order_acquire));
}

int64_t ProbeRingReader::ResolvedThrough(uint32_t local_rank) const {
  if (local_rank >= rings_.size()) return 0;
  return view_.probe_ring(local_rank).resolved_through_ns.load(std::memory_order_acquire);
}

ProbeRingReport ProbeRingReader::Report(uint32_t local_rank) const {
  ProbeRingReport out;
  out.local_rank = local_rank;
  if (local_rank >= rings_.size()) return out;
  const v2::ProbeRingHeader& ring = view_.probe_ring(local_rank);
  out.producer_pid = ring.producer_pid.load(std::memory_order_relaxed);
  out.backend = ring.backend.load(std::memory_order_relaxed);
  out.resolved_through_ns = ring.resolved_through_ns.load(std::memory_order_relaxed);
  out.dropped_full = ring.dropped_full.load(std::memory_order_relaxed);
  out.dropped_unresolved = ring.dropped_unresolved.load(std::memory_order_relaxed);
  out.collectives_seen = ring.collectives_seen.load(std::memory_order_relaxed);
  out.records_read = rings_[local_rank].records_read;
  out.invalid = rings_[local_rank].invalid;
  out.last_error = rings_[local_rank].last_error;
  return out;
}

}  // namespace stagefrontier::shm
