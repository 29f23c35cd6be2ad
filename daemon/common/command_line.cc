#include "daemon/common/command_line.h"

#include <algorithm>
#include <iostream>
#include <vector>

#include "spdlog/spdlog.h"

namespace stagefrontier {

void AddLogLevelFlag(CLI::App& app, std::string* level) {
  if (level->empty()) *level = "info";
  app.add_option("--log-level", *level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
}

void ApplyLogLevel(const std::string& level) { spdlog::set_level(spdlog::level::from_str(level)); }

namespace {

// Edit distance, for "did you mean".
size_t Distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// " (did you mean X?)" for the nearest of `known`, two edits away at most (a third of the word
// for long ones).
std::string Suggestion(const std::string& word, const std::vector<std::string>& known) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const std::string& k : known) {
    const size_t d = Distance(word, k);
    if (d < best_distance) {
      best = k;
      best_distance = d;
    }
  }
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

// The option named `name` ("--job", "-j") of `app` or an app above it.
const CLI::Option* FindOption(const CLI::App* app, const std::string& name) {
  for (; app != nullptr; app = app->get_parent()) {
    if (const CLI::Option* o = app->get_option_no_throw(name)) return o;
  }
  return nullptr;
}

std::vector<std::string> LongNames(const CLI::App* app) {
  std::vector<std::string> out;
  for (; app != nullptr; app = app->get_parent()) {
    for (const CLI::Option* o : app->get_options()) {
      for (const std::string& n : o->get_lnames()) out.push_back("--" + n);
    }
  }
  out.push_back("--help");
  return out;
}

}  // namespace

CLI::Validator ListenAddress(bool empty_ok) {
  return CLI::Validator(
      [empty_ok](std::string& value) -> std::string {
        if (value.empty()) return empty_ok ? "" : "an address is needed (HOST:PORT)";
        const size_t colon = value.rfind(':');
        const std::string host = colon == std::string::npos ? "" : value.substr(0, colon);
        const std::string port = colon == std::string::npos ? "" : value.substr(colon + 1);
        if (host.empty() || port.empty() || port.size() > 5 ||
            port.find_first_not_of("0123456789") != std::string::npos) {
          return "\"" + value + "\" is not HOST:PORT (e.g. 127.0.0.1:7311, [::1]:7311)";
        }
        if (std::stoi(port) > 65535) return "port " + port + " is outside 0..65535";
        return "";
      },
      "HOST:PORT");
}

std::string UnknownArgument(CLI::App& app, int argc, const char* const* argv) {
  CLI::App* at = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() > 1 && arg[0] == '-') {
      const std::string name = arg.substr(0, arg.find('='));
      if (name == "--help" || name == "-h") continue;
      const CLI::Option* o = FindOption(at, name);
      if (o == nullptr) {
        const std::string where = at == &app ? "" : " of " + at->get_name();
        return "unknown flag " + name + where + Suggestion(name, LongNames(at));
      }
      // A flag that takes a value and was not given one with '=' takes the next argument.
      if (o->get_items_expected_max() > 0 && arg.find('=') == std::string::npos) ++i;
      continue;
    }
    std::vector<std::string> names;
    CLI::App* sub = nullptr;
    for (CLI::App* s : at->get_subcommands([](CLI::App*) { return true; })) {
      if (s->get_name().empty()) continue;
      names.push_back(s->get_name());
      if (s->check_name(arg)) sub = s;
    }
    if (sub != nullptr) {
      at = sub;
    } else if (!names.empty() &&
               static_cast<const CLI::App*>(at)
                   ->get_options([](const CLI::Option* o) { return o->get_positional(); })
                   .empty()) {
      return "unknown command \"" + arg + "\"" + Suggestion(arg, names);
    }
  }
  return "";
}

int ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // A misspelling is the likeliest cause of whatever CLI11 found first (a required flag
    // missing, "a subcommand is required", extras): name it.
    const std::string unknown = UnknownArgument(app, argc, argv);
    std::cerr << app.get_name() << ": " << (unknown.empty() ? e.what() : unknown) << "\n"
              << "Run with --help for the flags.\n";
    return kUsageExit;
  }
  return -1;
}

}  // namespace stagefrontier
