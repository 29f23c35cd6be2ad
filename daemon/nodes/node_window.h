// What one closed verdict window charges to nodes, as the node ledger records it
// (node_ledger.h): for a CLEAR "job" window that detector health trusts and that is not
// group-wide, each suspect (stage, rank) is charged to the node that served the rank, with
// its excess and the ranks that waited for it (world size - 1: every other rank of the job).
// A verdict that names a whole node (node_verdict.h) charges that node once, with its ranks'
// excess in the top stage. HEALTHY and AMBIGUOUS windows charge nothing (an ambiguous
// verdict does not say whose fault it is) but still count as windows the nodes served.
//
//   v1::NodeWindow w = NodeWindowFromVerdict(job, world, schema, verdict, rank_nodes,
//                                            /*unreliable=*/false, wall_ns);
//   ledger->Record(w);
#ifndef STAGEFRONTIER_DAEMON_NODES_NODE_WINDOW_H_
#define STAGEFRONTIER_DAEMON_NODES_NODE_WINDOW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/accounting/verdict.h"
#include "shm/stage_schema.h"
#include "stagefrontier/v1/journal.pb.h"

namespace stagefrontier {

// `rank_nodes[r]` is the node serving rank r ("" if unknown: its charge is kept with an
// empty node, which the ledger counts as unattributed). The window's node set is every
// non-empty entry, sorted and unique.
v1::NodeWindow NodeWindowFromVerdict(const std::string& job, int32_t world_size,
                                     const StageSchema& schema, const Verdict& verdict,
                                     const std::vector<std::string>& rank_nodes, bool unreliable,
                                     int64_t wall_time_ns);

// Whether the window charges its suspects (the rule above).
bool WindowCharges(const Verdict& verdict, bool unreliable);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_NODES_NODE_WINDOW_H_
