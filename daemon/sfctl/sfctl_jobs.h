// sfctl jobs: the jobs the coordinator holds, a line each. docs/cli.md.
//
//   SfctlCommand c = JobsCommand();  // an entry of SfctlCommands()
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_JOBS_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_JOBS_H_

#include "daemon/sfctl/sfctl_command.h"

namespace stagefrontier {

SfctlCommand JobsCommand();

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_JOBS_H_
