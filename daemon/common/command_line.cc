#include "daemon/common/command_line.h"

#include <iostream>

#include "spdlog/spdlog.h"

namespace stagefrontier {

void AddLogLevelFlag(CLI::App& app, std::string* level) {
  if (level->empty()) *level = "info";
  app.add_option("--log-level", *level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
}

void ApplyLogLevel(const std::string& level) { spdlog::set_level(spdlog::level::from_str(level)); }

int ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << app.get_name() << ": " << e.what() << "\n"
              << "Run with --help for the flags.\n";
    return kUsageExit;
  }
  return -1;
}

}  // namespace stagefrontier
