#include "daemon/nodes/node_metrics.h"

namespace stagefrontier {

NodeMetrics::NodeMetrics(prometheus::Registry& r, size_t max_nodes) : max_nodes_(max_nodes) {
  gpu_seconds_ = &prometheus::BuildGauge()
                      .Name("stagefrontier_node_wasted_gpu_seconds")
                      .Help(
                          "GPU-seconds the node's ranks made others wait, across all jobs "
                          "(excess x ranks that waited; docs/node-ledger.md)")
                      .Register(r);
  class_ = &prometheus::BuildGauge()
                .Name("stagefrontier_node_class")
                .Help("The node's class: 0 healthy, 1 transient, 2 chronic")
                .Register(r);
  charged_windows_ = &prometheus::BuildGauge()
                          .Name("stagefrontier_node_charged_windows")
                          .Help("Verdict windows that charged the node, across all jobs")
                          .Register(r);
  auto& count = prometheus::BuildGauge()
                    .Name("stagefrontier_nodes")
                    .Help("Nodes in the ledger, by class")
                    .Register(r);
  for (NodeClass c : {NodeClass::kHealthy, NodeClass::kTransient, NodeClass::kChronic}) {
    by_class_[static_cast<size_t>(c)] = &count.Add({{"class", NodeClassName(c)}});
  }
  dropped_ = &prometheus::BuildGauge()
                  .Name("stagefrontier_node_series_dropped")
                  .Help("Charged nodes without per-node series (over --node-metrics-max)")
                  .Register(r)
                  .Add({});
  auto& drains = prometheus::BuildGauge()
                     .Name("stagefrontier_drain_hook_nodes")
                     .Help("Chronic nodes handed to the drain hook, by outcome")
                     .Register(r);
  const char* outcomes[] = {"dry_run",      "succeeded",    "failed",           "timeout",
                            "rate_limited", "refused_name", "identity_conflict"};
  for (size_t i = 0; i < drains_.size(); ++i) drains_[i] = &drains.Add({{"outcome", outcomes[i]}});
}

void NodeMetrics::Update(const std::vector<NodeGauge>& nodes, const DrainHookCounters* drains) {
  if (drains != nullptr) {
    const uint64_t v[] = {drains->dry_runs,          drains->succeeded,    drains->failed,
                          drains->timeouts,          drains->rate_limited, drains->refused_names,
                          drains->identity_conflicts};
    for (size_t i = 0; i < drains_.size(); ++i) drains_[i]->Set(static_cast<double>(v[i]));
  }
  std::array<double, 3> counts{};
  size_t shown = 0, dropped = 0;
  for (const NodeGauge& n : nodes) {
    counts[static_cast<size_t>(n.cls)] += 1;
    if (n.charged_windows == 0) continue;
    auto it = series_.find(n.node);
    if (it == series_.end()) {
      if (shown >= max_nodes_ || series_.size() >= max_nodes_) {
        ++dropped;
        continue;
      }
      const std::map<std::string, std::string> labels{{"node", n.node}};
      it = series_
               .emplace(n.node, Series{&gpu_seconds_->Add(labels), &class_->Add(labels),
                                       &charged_windows_->Add(labels)})
               .first;
    }
    ++shown;
    it->second.gpu_seconds->Set(n.gpu_seconds);
    it->second.cls->Set(static_cast<double>(n.cls));
    it->second.charged_windows->Set(static_cast<double>(n.charged_windows));
  }
  for (size_t c = 0; c < counts.size(); ++c) by_class_[c]->Set(counts[c]);
  dropped_->Set(static_cast<double>(dropped));
}

}  // namespace stagefrontier
