// The host-clock event backend: an event's time is the host's CLOCK_MONOTONIC when it is
// recorded. Right for CPU collectives that complete inside the call (Gloo, MPI, the fake
// libnccl of the tests); on a GPU it would only say when the collective was enqueued, which
// is why the CUDA backend exists.
//
//   std::unique_ptr<EventBackend> b = MakeHostClockBackend(/*capacity=*/8192);
#ifndef STAGEFRONTIER_CLIENT_PROBE_HOST_CLOCK_BACKEND_H_
#define STAGEFRONTIER_CLIENT_PROBE_HOST_CLOCK_BACKEND_H_

#include <memory>

#include "client/probe/event_backend.h"

namespace stagefrontier::probe {

// A backend with `capacity` events, all allocated now.
std::unique_ptr<EventBackend> MakeHostClockBackend(size_t capacity);

}  // namespace stagefrontier::probe

#endif  // STAGEFRONTIER_CLIENT_PROBE_HOST_CLOCK_BACKEND_H_
