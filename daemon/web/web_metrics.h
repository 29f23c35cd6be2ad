// The web view's counters on /metrics: requests served, malformed ones, and connections turned
// away at the bound. Registered whether or not --http-listen is set (then they stay 0).
//
//   WebMetrics m(*metrics.registry());
//   m.Update(web->counters());   // from the coordinator's ticker, once a second
#ifndef STAGEFRONTIER_DAEMON_WEB_WEB_METRICS_H_
#define STAGEFRONTIER_DAEMON_WEB_WEB_METRICS_H_

#include <cstdint>

#include "daemon/common/counter_follower.h"
#include "daemon/web/web_server.h"
#include "prometheus/registry.h"

namespace stagefrontier {

class WebMetrics {
 public:
  explicit WebMetrics(prometheus::Registry& registry);

  // Moves the counters up to the server's totals. Not thread-safe: one caller.
  void Update(const WebServerCounters& counters);

 private:
  CounterFollower requests_, bad_, refused_, timed_out_, evicted_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_WEB_WEB_METRICS_H_
