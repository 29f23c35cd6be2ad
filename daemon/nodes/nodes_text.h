// The node ledger's ListNodes reply as a table for people (sfctl nodes, stagefrontier nodes).
//
//   std::cout << RenderNodesText(reply);
#ifndef STAGEFRONTIER_DAEMON_NODES_NODES_TEXT_H_
#define STAGEFRONTIER_DAEMON_NODES_NODES_TEXT_H_

#include <string>

#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

// Most costly first: class, wasted GPU-seconds, charged/served windows, EWMA, jobs charged,
// hangs, top stages, last jobs, first and last seen (UTC); then each hung node's last hang.
std::string RenderNodesText(const v1::ListNodesReply& reply);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_NODES_NODES_TEXT_H_
