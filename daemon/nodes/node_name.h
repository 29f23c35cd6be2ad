// Which node names StageFrontier hands to other programs (a drain command's environment) and
// keeps in its files (the fleet baseline): names come from sidecars and sweeps, so they are
// checked rather than trusted.
//
//   if (!SafeNodeName(name)) return InvalidArgument(...);
#ifndef STAGEFRONTIER_DAEMON_NODES_NODE_NAME_H_
#define STAGEFRONTIER_DAEMON_NODES_NODE_NAME_H_

#include <string>

namespace stagefrontier {

// True for 1 to 253 characters of [A-Za-z0-9._-] (a host name, a Kubernetes node name).
bool SafeNodeName(const std::string& node);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_NODES_NODE_NAME_H_
