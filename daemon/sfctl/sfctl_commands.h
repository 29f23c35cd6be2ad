// sfctl's dispatch table: every subcommand, in the order --help lists them. main adds each to
// the command line and runs the one the line selected.
//
//   for (const SfctlCommand& c : SfctlCommands()) {
//     CLI::App* sub = app.add_subcommand(c.name, c.description);
//     runs.push_back({sub, c.bind(sub)});
//   }
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_COMMANDS_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_COMMANDS_H_

#include <vector>

#include "daemon/sfctl/sfctl_command.h"

namespace stagefrontier {

std::vector<SfctlCommand> SfctlCommands();

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_COMMANDS_H_
