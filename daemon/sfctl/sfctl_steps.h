// sfctl steps: per-step accounting of a job over a range of steps. docs/cli.md.
//
//   SfctlCommand c = StepsCommand();  // an entry of SfctlCommands()
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_STEPS_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_STEPS_H_

#include "daemon/sfctl/sfctl_command.h"

namespace stagefrontier {

SfctlCommand StepsCommand();

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_STEPS_H_
