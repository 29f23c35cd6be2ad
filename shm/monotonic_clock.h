// The one clock every StageFrontier timestamp uses: CLOCK_MONOTONIC in nanoseconds (and the
// wall clock, for display only). It is
// read through the vDSO (no system call) and is shared by every process of a node, so the
// sidecar can compare a stub's heartbeat with its own clock.
//
//   int64_t t = stagefrontier::shm::MonotonicNowNs();
#ifndef STAGEFRONTIER_SHM_MONOTONIC_CLOCK_H_
#define STAGEFRONTIER_SHM_MONOTONIC_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace stagefrontier::shm {

// Returns CLOCK_MONOTONIC in nanoseconds. Never fails on Linux.
inline int64_t MonotonicNowNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Returns CLOCK_REALTIME in nanoseconds since the Unix epoch: for display and file stamps
// only (it jumps when the clock is set; never order or subtract with it).
inline int64_t RealtimeNowNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace stagefrontier::shm

#endif  // STAGEFRONTIER_SHM_MONOTONIC_CLOCK_H_
