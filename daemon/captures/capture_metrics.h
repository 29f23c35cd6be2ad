// The captures on /metrics: what the policy asked, what the sidecars delivered, what the
// analysis made of it. The components keep their own counts; Update brings the Prometheus
// counters up to them (the coordinator's ticker calls it every second).
//
//   CaptureMetrics m(*metrics.registry());
//   m.Update(trigger.counters(), store.counters(), reports.counters());
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_METRICS_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "daemon/captures/capture_reports.h"
#include "daemon/captures/capture_store.h"
#include "daemon/captures/capture_trigger.h"
#include "daemon/common/counter_follower.h"

namespace stagefrontier {

class CaptureMetrics {
 public:
  explicit CaptureMetrics(prometheus::Registry& registry);

  void Update(const CaptureTrigger::Counters& trigger, const CaptureStore::Counters& store,
              const CaptureReports::Counters& reports);

 private:
  CounterFollower asked_, skipped_, unreached_, files_, bytes_, refused_, evicted_, analysed_,
      failed_;
  CounterFollower rank_done_, rank_failed_, abandoned_, refused_not_asked_, refused_busy_;
  prometheus::Gauge* partial_bytes_ = nullptr;
  prometheus::Gauge* partial_uploads_ = nullptr;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_METRICS_H_
