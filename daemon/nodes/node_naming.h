// The verdict pipeline's node steps, composed: after the engine's decision, is the fault a
// node's? NameWholeNode reads the verdict's cells (the ranks it holds responsible are exactly a
// node's), NameSlowNode measures the window's steps (every rank of a node slower than its
// group's ranks elsewhere). A CLEAR on one rank is the rank evidence's call: where the node
// holding that rank can be measured against peers on other nodes (NodesToCompare), the cells
// alone (an eighth of the top cell's excess on each of the node's other ranks, which contention
// gives a healthy rank now and then) do not overturn it; the per-step test decides.
//
//   NameNode(schema, placement, deciding_group, window_steps, thresholds, &verdict);
//   if (!verdict.node.empty()) page_the_node_owner(verdict.node);
#ifndef STAGEFRONTIER_DAEMON_NODES_NODE_NAMING_H_
#define STAGEFRONTIER_DAEMON_NODES_NODE_NAMING_H_

#include <cstdint>
#include <span>
#include <vector>

#include "daemon/accounting/step_input.h"
#include "daemon/accounting/verdict.h"
#include "daemon/nodes/node_shift.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

// `deciding_group`: as NameWholeNode's. `steps`: the window's raw steps (NameSlowNode's).
void NameNode(const StageSchema& schema, const RankPlacement& placement,
              std::span<const int32_t> deciding_group, const std::vector<const StepInput*>& steps,
              const NodeShiftThresholds& th, Verdict* v);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_NODES_NODE_NAMING_H_
