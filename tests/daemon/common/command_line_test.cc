// Usage errors name the misspelt flag or subcommand (issue 30, item 6): `sfctl suspects --jbo x`
// said "--job is required", `sfctl suspect` "A subcommand is required".
#include "daemon/common/command_line.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace stagefrontier {
namespace {

// An sfctl-like app: global flags, subcommands with their own, one positional.
struct Sfctl {
  Sfctl() {
    app.add_option("--coordinator", coordinator, "address");
    app.add_flag("--json", json, "json");
    auto* suspects = app.add_subcommand("suspects", "verdict");
    suspects->add_option("--job", job, "job")->required();
    suspects->add_option("--window", window, "window");
    auto* health = app.add_subcommand("health", "health");
    health->add_option("--job", job, "job")->required();
    auto* analyze = app.add_subcommand("analyze", "a file");
    analyze->add_option("file", file, "the file");
    app.require_subcommand(1);
  }
  std::string Unknown(std::vector<const char*> args) {
    args.insert(args.begin(), "sfctl");
    return UnknownArgument(app, static_cast<int>(args.size()), args.data());
  }
  CLI::App app{"test", "sfctl"};
  std::string coordinator, job, file;
  bool json = false;
  int window = 0;
};

TEST_CASE("command line: the misspelt flag is named, with the nearest known one") {
  Sfctl s;
  CHECK(s.Unknown({"suspects", "--jbo", "x"}) ==
        "unknown flag --jbo of suspects (did you mean --job?)");
  CHECK(s.Unknown({"--coordinatr", "h:1", "suspects", "--job", "x"}) ==
        "unknown flag --coordinatr (did you mean --coordinator?)");
  CHECK(s.Unknown({"suspects", "--job", "x", "--zzzzzz"}) == "unknown flag --zzzzzz of suspects");
  CHECK(s.Unknown({"suspects", "--job=x", "--widnow=3"}) ==
        "unknown flag --widnow of suspects (did you mean --window?)");
}

TEST_CASE("command line: the misspelt subcommand is named") {
  Sfctl s;
  CHECK(s.Unknown({"suspect", "--job", "x"}) ==
        "unknown command \"suspect\" (did you mean suspects?)");
  CHECK(s.Unknown({"--json", "helth"}) == "unknown command \"helth\" (did you mean health?)");
}

TEST_CASE("command line: a correct line names nothing; values and positionals are skipped") {
  Sfctl s;
  CHECK(s.Unknown({"suspects", "--job", "--json"}).empty());  // "--json" is --job's value
  CHECK(s.Unknown({"--coordinator", "suspect", "health", "--job", "j"}).empty());
  CHECK(s.Unknown({"analyze", "run.jsonl"}).empty());
  CHECK(s.Unknown({"health", "--help"}).empty());
  CHECK(s.Unknown({"health", "--", "--anything"}).empty());
}

TEST_CASE("command line: the parse names the typo, not what it left missing, and exits 2") {
  Sfctl s;
  const char* argv[] = {"sfctl", "suspects", "--jbo", "x"};
  CHECK(ParseCommandLine(s.app, 4, const_cast<char**>(argv)) == kUsageExit);
  Sfctl ok;
  const char* good[] = {"sfctl", "suspects", "--job", "x"};
  CHECK(ParseCommandLine(ok.app, 4, const_cast<char**>(good)) == -1);
  CHECK(ok.job == "x");
}

}  // namespace
}  // namespace stagefrontier
