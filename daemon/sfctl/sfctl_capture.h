// sfctl capture: asks ranks of a job for a profiler capture of the same future steps (one per
// job at a time). docs/cli.md.
//
//   SfctlCommand c = CaptureCommand();  // an entry of SfctlCommands()
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_CAPTURE_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_CAPTURE_H_

#include "daemon/sfctl/sfctl_command.h"

namespace stagefrontier {

SfctlCommand CaptureCommand();

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_CAPTURE_H_
