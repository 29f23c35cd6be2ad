// sfctl watch: prints a job's verdicts as windows close (a stream: no --timeout deadline).
// docs/cli.md.
//
//   SfctlCommand c = WatchCommand();  // an entry of SfctlCommands()
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_WATCH_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_WATCH_H_

#include "daemon/sfctl/sfctl_command.h"

namespace stagefrontier {

SfctlCommand WatchCommand();

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_WATCH_H_
