#include "daemon/nodes/node_naming.h"

#include <algorithm>
#include <string>

#include "daemon/nodes/node_verdict.h"

namespace stagefrontier {
namespace {

// A CLEAR on one rank whose node the node shift can measure.
bool OneRankOnMeasurableNode(const RankPlacement& placement, const Verdict& v) {
  if (v.label != VerdictLabel::kClear || v.candidate_ranks.size() != 1) return false;
  const int32_t r = v.candidate_ranks[0];
  if (r < 0 || static_cast<size_t>(r) >= placement.rank_nodes.size()) return false;
  const std::string& node = placement.rank_nodes[r];
  if (node.empty()) return false;
  const std::vector<std::string> nodes = NodesToCompare(placement);
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

}  // namespace

void NameNode(const StageSchema& schema, const RankPlacement& placement,
              std::span<const int32_t> deciding_group, const std::vector<const StepInput*>& steps,
              const NodeShiftThresholds& th, Verdict* v) {
  if (!OneRankOnMeasurableNode(placement, *v)) {
    NameWholeNode(schema, placement.rank_nodes, v, deciding_group);
  }
  if (!v->node.empty() || v->steps <= 0) return;
  NameSlowNode(schema, placement, steps, th, v);
}

}  // namespace stagefrontier
