// sfctl nodes: the node ledger, what each node cost across jobs. docs/cli.md.
//
//   SfctlCommand c = NodesCommand();  // an entry of SfctlCommands()
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_NODES_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_NODES_H_

#include "daemon/sfctl/sfctl_command.h"

namespace stagefrontier {

SfctlCommand NodesCommand();

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_NODES_H_
