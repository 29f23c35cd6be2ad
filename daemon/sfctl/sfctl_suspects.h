// sfctl suspects: a job's verdict and suspects, for the current window or the last N steps.
// docs/cli.md.
//
//   SfctlCommand c = SuspectsCommand();  // an entry of SfctlCommands()
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_SUSPECTS_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_SUSPECTS_H_

#include "daemon/sfctl/sfctl_command.h"

namespace stagefrontier {

SfctlCommand SuspectsCommand();

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_SUSPECTS_H_
