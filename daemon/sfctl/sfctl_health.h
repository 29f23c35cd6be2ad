// sfctl health: per-rank health of a job. docs/cli.md.
//
//   SfctlCommand c = HealthCommand();  // an entry of SfctlCommands()
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_HEALTH_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_HEALTH_H_

#include "daemon/sfctl/sfctl_command.h"

namespace stagefrontier {

SfctlCommand HealthCommand();

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_HEALTH_H_
