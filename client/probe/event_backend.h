// Where the probe's timestamps come from: an interface over a preallocated pool of events that
// are recorded on a collective's stream and later resolved to CLOCK_MONOTONIC times. The CUDA
// backend (cuda_event_backend.cc) records cudaEvents; the host-clock backend records the
// host's clock at once, so that all the probe's logic runs and is tested without a GPU.
//
// Threading contract: Record is called by the thread that issues the collective, Query by the
// probe's resolver thread, for different indexes at a time (the tracker hands an index to the
// resolver only after both its Record calls returned). Neither blocks nor allocates.
//
//   std::unique_ptr<EventBackend> b = MakeHostClockBackend(2 * 4096);
//   b->Record(7, stream);
//   int64_t t; if (b->Query(7, &t) == EventStatus::kReady) Use(t);
#ifndef STAGEFRONTIER_CLIENT_PROBE_EVENT_BACKEND_H_
#define STAGEFRONTIER_CLIENT_PROBE_EVENT_BACKEND_H_

#include <cstddef>
#include <cstdint>

namespace stagefrontier::probe {

enum class EventStatus {
  kPending,  // recorded, the stream has not reached it yet
  kReady,    // completed; its time is known
  kError,    // the backend failed for this event (it is never retried)
};

class EventBackend {
 public:
  virtual ~EventBackend() = default;
  // "cuda" or "host_clock".
  virtual const char* name() const = 0;
  // The shm v2::ProbeBackend value written into the probe ring.
  virtual uint32_t ring_backend() const = 0;
  // Events are addressed by index in [0, capacity()); all are created up front.
  virtual size_t capacity() const = 0;
  // Records event `index` on `stream` (a cudaStream_t for CUDA; ignored by the host clock).
  // Never synchronizes. Returns false if the backend refused (the interval is then dropped).
  virtual bool Record(size_t index, void* stream) noexcept = 0;
  // Polls event `index`; on kReady, *t_ns is its completion time on CLOCK_MONOTONIC.
  virtual EventStatus Query(size_t index, int64_t* t_ns) noexcept = 0;
  // Called by the resolver thread between polls (the CUDA backend refreshes its clock anchor).
  virtual void Maintain(int64_t /*now_ns*/) noexcept {}
};

}  // namespace stagefrontier::probe

#endif  // STAGEFRONTIER_CLIENT_PROBE_EVENT_BACKEND_H_
