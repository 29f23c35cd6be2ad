// The node ledger as the query API shows it (ListNodes, proto/stagefrontier/v1/query.proto).
//
//   v1::ListNodesReply reply;
//   absl::Status s = FillListNodes(ledger, request, &reply);
#ifndef STAGEFRONTIER_DAEMON_NODES_NODES_REPLY_H_
#define STAGEFRONTIER_DAEMON_NODES_NODES_REPLY_H_

#include "absl/status/status.h"
#include "daemon/nodes/node_ledger.h"
#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

// Fills `reply` with the ledger's nodes, most costly first, filtered by class and limited.
// InvalidArgument for an unknown class name or a negative limit.
[[nodiscard]] absl::Status FillListNodes(const NodeLedger& ledger,
                                         const v1::ListNodesRequest& request,
                                         v1::ListNodesReply* reply);

// One node's summary as its proto.
void NodeSummaryToProto(const NodeSummary& node, v1::NodeInfo* out);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_NODES_NODES_REPLY_H_
