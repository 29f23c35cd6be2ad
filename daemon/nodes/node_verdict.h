// A whole node named: when the ranks a verdict names for one stage are exactly the ranks one
// node serves (two or more, in a job that spans several nodes), the fault is the node's (a
// throttled machine, a bad PCIe switch, a noisy neighbour), not any one rank's. A step of the
// verdict pipeline after the engine's decision: the engine does not know nodes.
//
//   Verdict v = engine->CurrentVerdict();
//   NameWholeNode(schema, rank_nodes, &v);
//   if (!v.node.empty()) page_the_node_owner(v.node);
#ifndef STAGEFRONTIER_DAEMON_NODES_NODE_VERDICT_H_
#define STAGEFRONTIER_DAEMON_NODES_NODE_VERDICT_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "daemon/accounting/verdict.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

// The ranks the verdict holds responsible in its top stage: an AMBIGUOUS TIE's candidates, or
// the heatmap cells in the top suspect's stage with at least an eighth of its excess (each
// step charges its last rank: equally slow ranks split the steps unevenly). If they are exactly
// the ranks node N serves (rank_nodes[r]: the node of rank r, "" unknown) and hold the top
// suspect's rank (the charged cells can be the ranks that waited for it), sets v->node = N,
// makes the verdict CLEAR (the node settles the tie) and says so first in the explanation:
// "node n1: all 4 of its ranks slow in fwd". Leaves the verdict alone otherwise (HEALTHY,
// group-wide, one rank, ranks of several nodes, or the job's every rank on one node).
// `deciding_group` (sorted; empty: every rank): in a job of role groups, the ranks of the group
// whose verdict the job carries. Only its cells count: another role's cells in the same stage
// measure other work (a single slow pipeline rank's node was named through its pipeline peer's
// noise in fwd); a node that holds ranks of several roles is the node shift's to name.
void NameWholeNode(const StageSchema& schema, const std::vector<std::string>& rank_nodes,
                   Verdict* v, std::span<const int32_t> deciding_group = {});

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_NODES_NODE_VERDICT_H_
