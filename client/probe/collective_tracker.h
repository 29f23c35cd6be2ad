// The probe's core, independent of CUDA and of NCCL: the issuing thread brackets each
// collective with two events (Begin before the call, End after it); the resolver thread
// polls the events in call order and publishes each completed collective as an interval into
// the rank's probe ring. Everything is preallocated: a fixed queue of pending collectives and
// two backend events per queue entry.
//
// Threading contract: any number of threads may call Begin/End; one collective is tracked at
// a time (Begin takes an atomic flag that End releases, and a Begin that finds it taken is
// not sampled and is counted) because NCCL callers issue from one thread per communicator
// and a group (ncclGroupStart..End) is one tracked interval. Poll runs on one resolver
// thread. Begin/End never block, allocate or make a system call (the host-clock backend
// reads the vDSO clock; the CUDA backend calls cudaEventRecord).
//
//   CollectiveTracker t(backend.get(), &ring_writer, TrackerOptions{});
//   int64_t ticket = t.Begin({.op = v2::kOpAllReduce, .bytes = n, .comm_id = id}, stream);
//   ncclResult_t r = real_all_reduce(...);
//   t.End(ticket, stream, /*ok=*/r == ncclSuccess);
//   ... on the resolver thread: t.Poll(MonotonicNowNs());
#ifndef STAGEFRONTIER_CLIENT_PROBE_COLLECTIVE_TRACKER_H_
#define STAGEFRONTIER_CLIENT_PROBE_COLLECTIVE_TRACKER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "client/probe/event_backend.h"
#include "shm/probe_ring_writer.h"
#include "shm/segment_layout_v1.h"

namespace stagefrontier::probe {

// Which collectives are timed. The step counter is the slot's published-step cursor, so the
// probe follows the stub's steps without calling into it.
struct SamplingPolicy {
  enum class Mode {
    kAll,        // every collective
    kEveryN,     // collectives of one step in `every_n_steps`
    kOnRequest,  // only while a coordinator trace request for this rank is in effect
  };
  Mode mode = Mode::kAll;
  uint32_t every_n_steps = 1;
};

struct TrackerOptions {
  size_t max_pending = 4096;  // a power of two; collectives issued but not yet resolved
  // An event still pending this long after the call is given up (counted unresolved).
  int64_t unresolved_after_ns = 30'000'000'000;
  SamplingPolicy sampling;
  // The rank's slot (for step-based sampling); may be null with Mode::kAll.
  const shm::v1::SlotHeader* slot = nullptr;
};

struct CollectiveCall {
  uint16_t op = 0;  // shm::v2::CollectiveOp
  uint16_t flags = 0;
  uint64_t bytes = 0;
  uint64_t comm_id = 0;
};

struct TrackerStats {
  uint64_t begun = 0;           // calls seen (sampled or not)
  uint64_t sampled = 0;         // calls bracketed with events
  uint64_t published = 0;       // intervals written to the ring
  uint64_t dropped_busy = 0;    // another collective was being tracked on another thread
  uint64_t dropped_queue = 0;   // the pending queue was full (resolver behind)
  uint64_t dropped_failed = 0;  // the call failed or an event could not be recorded
  uint64_t dropped_ring = 0;    // the probe ring was full
  uint64_t unresolved = 0;      // events that never completed or failed
};

class CollectiveTracker {
 public:
  static constexpr int64_t kNotSampled = -1;

  // `backend` must have at least 2 * options.max_pending events; both pointers must outlive
  // the tracker.
  CollectiveTracker(EventBackend* backend, shm::ProbeRingWriter* ring, TrackerOptions options);

  // Before the collective is issued: records the "before" event on `stream`. Returns a
  // ticket for End, or kNotSampled (End is then a no-op).
  int64_t Begin(const CollectiveCall& call, void* stream) noexcept;
  // After the collective is issued: records the "after" event and queues the collective for
  // the resolver; ok = false (the call failed) drops it. Adds `bytes` to the call's payload
  // (for a group's later members).
  void End(int64_t ticket, void* stream, bool ok) noexcept;
  // Adds a grouped call to the collective opened by Begin (same ticket): its bytes are summed.
  void AddToGroup(int64_t ticket, uint64_t bytes) noexcept;

  // Resolver thread: publishes every queued collective whose events completed, in call
  // order, and advances the ring's resolved-through watermark. Returns how many it published.
  size_t Poll(int64_t now_ns) noexcept;

  TrackerStats stats() const noexcept;

 private:
  struct Pending {
    CollectiveCall call;
    int64_t call_ns = 0;
    uint64_t seq = 0;
    bool ok = true;
  };
  bool ShouldSample() noexcept;

  EventBackend* backend_;
  shm::ProbeRingWriter* ring_;
  TrackerOptions options_;
  std::unique_ptr<Pending[]> pending_;
  uint64_t mask_;
  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
  alignas(64) std::atomic<uint64_t> head_{0};  // written by the issuing side
  std::atomic<int64_t> entering_ns_{0};        // call time of the collective being issued
  uint64_t next_seq_ = 0;
  uint64_t request_seen_ = 0;                  // sampling on request: the request in effect
  uint64_t request_cursor_ = 0;                // the step cursor when it was first seen
  alignas(64) std::atomic<uint64_t> tail_{0};  // written by the resolver
  // Counters: relaxed atomics, read by stats() from any thread.
  std::atomic<uint64_t> begun_{0}, sampled_{0}, published_{0}, dropped_busy_{0}, dropped_queue_{0},
      dropped_failed_{0}, dropped_ring_{0}, unresolved_{0};
};

}  // namespace stagefrontier::probe

#endif  // STAGEFRONTIER_CLIENT_PROBE_COLLECTIVE_TRACKER_H_
