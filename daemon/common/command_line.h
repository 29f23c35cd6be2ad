// What every StageFrontier command line shares: the --log-level flag of the daemons, and one
// way to end on a usage error. CLI11's own exit codes for usage errors vary (100 to 115);
// ours are documented as 2.
//
//   CLI::App app{"..."};
//   std::string level = AddLogLevelFlag(app);  (or a pointer you own)
//   if (int rc = ParseCommandLine(app, argc, argv); rc >= 0) return rc;
//   ApplyLogLevel(level);
#ifndef STAGEFRONTIER_DAEMON_COMMON_COMMAND_LINE_H_
#define STAGEFRONTIER_DAEMON_COMMON_COMMAND_LINE_H_

#include <string>

#include "CLI/CLI.hpp"

namespace stagefrontier {

// Exit status of a usage error (bad flag, bad value, missing option), for every command.
inline constexpr int kUsageExit = 2;

// Adds --log-level (trace, debug, info, warn, error; default info) bound to *level.
void AddLogLevelFlag(CLI::App& app, std::string* level);
// Sets spdlog's level from a value AddLogLevelFlag accepted.
void ApplyLogLevel(const std::string& level);

// Checks a listening address flag: HOST:PORT or [IPV6]:PORT with PORT in 0..65535 (0: any
// free port), or empty when `empty_ok`. e.g. app.add_option(...)->check(ListenAddress(false)).
CLI::Validator ListenAddress(bool empty_ok);

// Parses the command line. Returns -1 when the program should go on; otherwise the exit
// status to return at once: 0 after printing --help, kUsageExit after printing what was wrong
// with the command line (and where to read the flags) to standard error. A misspelt flag or
// subcommand is named first ("unknown flag --jbo (did you mean --job?)"), rather than what it
// left missing.
int ParseCommandLine(CLI::App& app, int argc, char** argv);

// The first flag or subcommand on the command line that `app` (and the subcommands the line
// selects) does not know, as a message with the nearest known name; empty if none.
std::string UnknownArgument(CLI::App& app, int argc, const char* const* argv);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_COMMAND_LINE_H_
