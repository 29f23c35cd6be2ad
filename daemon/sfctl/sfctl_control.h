// sfctl control: one runtime action on a job (pause, resume, sampling, a trace, thresholds).
// docs/cli.md.
//
//   SfctlCommand c = ControlCommand();  // an entry of SfctlCommands()
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_CONTROL_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_CONTROL_H_

#include "daemon/sfctl/sfctl_command.h"

namespace stagefrontier {

SfctlCommand ControlCommand();

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_CONTROL_H_
