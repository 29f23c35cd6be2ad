// The per-node shared-memory segment, layout version 2: version 1 plus one probe ring per
// slot, where the collective probe (client/probe) writes the intervals of the collectives it
// saw. FROZEN once released, like v1: extend in a v3.
//
// What v2 changes, and nothing else:
//   * SegmentHeader::layout_version is 2;
//   * the first bytes v1 reserved (header offset 136) hold a ProbeGeometry;
//   * after the last v1 slot, at ProbeGeometry::probe_offset, come slot_count probe slots:
//     probe slot = [ProbeRingHeader, 128 bytes][ProbeRecord x probe_ring_capacity, 64 bytes each]
// Every v1 offset and size is unchanged, so v1 code reads a v2 segment's step rings as is.
// Byte-level description: docs/segment-format.md.
//
//   const v2::ProbeGeometry* g = v2::Geometry(base);  // only if layout_version == 2
//   const v2::ProbeRingHeader* ring = ...;            // through SegmentView::probe_ring(i)
#ifndef STAGEFRONTIER_SHM_SEGMENT_LAYOUT_V2_H_
#define STAGEFRONTIER_SHM_SEGMENT_LAYOUT_V2_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "shm/segment_layout_v1.h"

namespace stagefrontier::shm::v2 {

inline constexpr uint32_t kLayoutVersion = 2;
inline constexpr size_t kProbeGeometryOffset = 136;  // inside v1's reserved header bytes
inline constexpr uint32_t kMinProbeRingCapacity = 2;
inline constexpr uint32_t kMaxProbeRingCapacity = 1U << 16;
inline constexpr uint32_t kDefaultProbeRingCapacity = 256;

struct ProbeGeometry {
  uint64_t probe_offset;         // 136 first probe slot: v1::SegmentBytes(slots, capacity)
  uint32_t probe_ring_capacity;  // 144 records per probe ring, a power of two
  uint32_t probe_record_bytes;   // 148 sizeof(ProbeRecord)
  uint64_t probe_slot_bytes;     // 152 sizeof(ProbeRingHeader) + capacity * record bytes
};
static_assert(sizeof(ProbeGeometry) == 24);

// Which producer feeds a probe ring (ProbeRingHeader::backend).
enum ProbeBackend : uint32_t {
  kProbeBackendNone = 0,
  kProbeBackendHostClock = 1,  // host timestamps around the call (CPU runs, tests)
  kProbeBackendCuda = 2,       // CUDA events on the collective's stream
  kProbeBackendCommHook = 3,   // a framework hook (the PyTorch DDP comm hook, Gloo)
};

struct alignas(v1::kCacheLine) ProbeRingHeader {
  // Producer line: written by the probe only. One producer per ring: it claims the ring by
  // a compare-and-swap of producer_pid from 0 (or from a dead process) to its own pid.
  std::atomic<uint32_t> producer_pid;        // 0   0 = none
  std::atomic<uint32_t> backend;             // 4   ProbeBackend
  std::atomic<uint64_t> write_cursor;        // 8   records published
  std::atomic<uint64_t> dropped_full;        // 16  intervals dropped, ring full
  std::atomic<int64_t> resolved_through_ns;  // 24  every collective called before this time
                                             //     (producer's clock) is published or dropped
  std::atomic<uint64_t> dropped_unresolved;  // 32  intervals dropped, events never completed
  std::atomic<uint64_t> collectives_seen;    // 40  calls the probe saw, sampled or not
  uint8_t reserved0[16];                     // 48
  // Reader line: written by the sidecar only.
  alignas(v1::kCacheLine) std::atomic<uint64_t> read_cursor;  // 64
  uint8_t reserved1[56];                                      // 72
};
static_assert(sizeof(ProbeRingHeader) == 128);
static_assert(offsetof(ProbeRingHeader, read_cursor) == 64);

// Collective operations (ProbeRecord::op).
enum CollectiveOp : uint16_t {
  kOpAllReduce = 0,
  kOpReduceScatter = 1,
  kOpAllGather = 2,
  kOpBroadcast = 3,
  kOpReduce = 4,
  kOpSend = 5,
  kOpRecv = 6,
  kOpCount = 7,
};

// Record flags.
inline constexpr uint16_t kProbeInGroup = 1U << 0;  // issued between ncclGroupStart/End

// One collective on one rank, on the producer's CLOCK_MONOTONIC. `seq` follows the step
// ring's protocol: 2*i+1 while written, 2*i+2 once complete.
struct alignas(v1::kCacheLine) ProbeRecord {
  std::atomic<uint64_t> seq;  // 0
  int64_t call_ns;            // 8   host time of the call into the collective
  int64_t start_ns;           // 16  the collective started on its stream (this rank arrived)
  int64_t end_ns;             // 24  the collective completed on its stream
  uint64_t bytes;             // 32  payload bytes of this rank's buffer
  uint64_t comm_id;           // 40  an opaque id of the communicator
  uint64_t collective_seq;    // 48  per-producer call number, from 0
  uint16_t op;                // 56  CollectiveOp
  uint16_t flags;             // 58
  uint32_t reserved;          // 60
};
static_assert(sizeof(ProbeRecord) == 64);

inline constexpr uint64_t ProbeSlotBytes(uint32_t probe_ring_capacity) {
  return sizeof(ProbeRingHeader) + uint64_t{probe_ring_capacity} * sizeof(ProbeRecord);
}
inline constexpr uint64_t SegmentBytes(uint32_t slot_count, uint32_t ring_capacity,
                                       uint32_t probe_ring_capacity) {
  return v1::SegmentBytes(slot_count, ring_capacity) +
         uint64_t{slot_count} * ProbeSlotBytes(probe_ring_capacity);
}

// Names of CollectiveOp values (the same numbers travel on the wire and in run files).
inline constexpr const char* kCollectiveOpNames[kOpCount] = {
    "all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "send", "recv"};
// "all_reduce", ...; "unknown" for values outside CollectiveOp.
inline constexpr const char* CollectiveOpName(uint16_t op) {
  return op < kOpCount ? kCollectiveOpNames[op] : "unknown";
}
// "none", "host_clock", "cuda", "comm_hook"; "unknown" for values outside ProbeBackend.
inline constexpr const char* ProbeBackendName(uint32_t backend) {
  constexpr const char* kNames[] = {"none", "host_clock", "cuda", "comm_hook"};
  return backend < 4 ? kNames[backend] : "unknown";
}

}  // namespace stagefrontier::shm::v2

#endif  // STAGEFRONTIER_SHM_SEGMENT_LAYOUT_V2_H_
