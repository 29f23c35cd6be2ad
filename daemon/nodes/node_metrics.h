// The node ledger on /metrics: per node (a bounded label) its wasted GPU-seconds, its class
// and its charged windows, how many nodes are in each class, and what the drain hook did.
//
//   NodeMetrics metrics(registry, /*max_nodes=*/1000);
//   metrics.Update(ledger.Gauges(), &hook.counters());   // from a periodic loop
//
// Only nodes that were charged at least once get per-node series (the others cost nothing
// to show), and at most `max_nodes` of them, most costly first; the rest are counted in
// stagefrontier_node_series_dropped. Thread-compatible: one updater.
#ifndef STAGEFRONTIER_DAEMON_NODES_NODE_METRICS_H_
#define STAGEFRONTIER_DAEMON_NODES_NODE_METRICS_H_

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/nodes/drain_hook.h"
#include "daemon/nodes/node_ledger.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace stagefrontier {

class NodeMetrics {
 public:
  NodeMetrics(prometheus::Registry& registry, size_t max_nodes);
  // Sets every series from `nodes` (most costly first, as NodeLedger::Gauges returns them) and,
  // if not null, the drain hook's outcomes.
  void Update(const std::vector<NodeGauge>& nodes, const DrainHookCounters* drains);

 private:
  struct Series {
    prometheus::Gauge* gpu_seconds;
    prometheus::Gauge* cls;
    prometheus::Gauge* charged_windows;
  };
  size_t max_nodes_;
  prometheus::Family<prometheus::Gauge>* gpu_seconds_;
  prometheus::Family<prometheus::Gauge>* class_;
  prometheus::Family<prometheus::Gauge>* charged_windows_;
  std::array<prometheus::Gauge*, 3> by_class_{};
  prometheus::Gauge* dropped_;
  std::array<prometheus::Gauge*, 7> drains_{};
  std::map<std::string, Series> series_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_NODES_NODE_METRICS_H_
