#include "daemon/nodes/node_metrics.h"

#include <catch2/catch.hpp>

#include "prometheus/text_serializer.h"

namespace stagefrontier {
namespace {

NodeGauge Node(const std::string& name, double gpu_s, int64_t charged, NodeClass c) {
  return {.node = name, .cls = c, .gpu_seconds = gpu_s, .charged_windows = charged};
}

std::string Exposition(prometheus::Registry& r) {
  return prometheus::TextSerializer().Serialize(r.Collect());
}

TEST_CASE("charged nodes get series, up to the bound; classes are counted") {
  prometheus::Registry registry;
  NodeMetrics metrics(registry, 2);
  DrainHookCounters drains;
  drains.dry_runs = 3;
  metrics.Update(
      {Node("slow", 9.5, 6, NodeClass::kChronic), Node("meh", 1, 1, NodeClass::kTransient),
       Node("third", 0.5, 1, NodeClass::kTransient), Node("fine", 0, 0, NodeClass::kHealthy)},
      &drains);
  const std::string text = Exposition(registry);
  CHECK(text.find("stagefrontier_node_wasted_gpu_seconds{node=\"slow\"} 9.5") != std::string::npos);
  CHECK(text.find("stagefrontier_node_class{node=\"slow\"} 2") != std::string::npos);
  CHECK(text.find("stagefrontier_node_charged_windows{node=\"meh\"} 1") != std::string::npos);
  CHECK(text.find("node=\"third\"") == std::string::npos);  // over the bound
  CHECK(text.find("node=\"fine\"") == std::string::npos);   // never charged
  CHECK(text.find("stagefrontier_node_series_dropped 1") != std::string::npos);
  CHECK(text.find("stagefrontier_nodes{class=\"transient\"} 2") != std::string::npos);
  CHECK(text.find("stagefrontier_nodes{class=\"healthy\"} 1") != std::string::npos);
  CHECK(text.find("stagefrontier_drain_hook_nodes{outcome=\"dry_run\"} 3") != std::string::npos);
}

}  // namespace
}  // namespace stagefrontier
