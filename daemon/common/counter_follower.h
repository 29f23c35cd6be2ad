// A Prometheus counter that follows a running total kept elsewhere (a component's own counters,
// read once a second): each call adds what the total grew by since the last one.
//
//   CounterFollower requests{&family.Add({})};
//   requests.To(server.counters().requests);
#ifndef STAGEFRONTIER_DAEMON_COMMON_COUNTER_FOLLOWER_H_
#define STAGEFRONTIER_DAEMON_COMMON_COUNTER_FOLLOWER_H_

#include <cstdint>

#include "prometheus/counter.h"

namespace stagefrontier {

struct CounterFollower {
  prometheus::Counter* counter = nullptr;
  uint64_t seen = 0;
  // Adds now - seen when the total grew; a total that went down (a restarted source) is taken
  // as the new starting point. Not thread-safe: one caller.
  void To(uint64_t now) {
    if (now > seen) counter->Increment(static_cast<double>(now - seen));
    seen = now;
  }
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_COUNTER_FOLLOWER_H_
