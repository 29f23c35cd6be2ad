// sfctl's dispatch table: every documented subcommand once, in --help's order; each binds its
// own flags; usage errors found after parsing exit 2 before any call; an unreachable
// coordinator exits 3.
#include "daemon/sfctl/sfctl_commands.h"

#include <catch2/catch.hpp>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace stagefrontier {
namespace {

// Parses `args` (after "sfctl") against the table; returns the selected subcommand's run.
struct Parsed {
  CLI::App app{"sfctl test", "sfctl"};
  std::vector<std::pair<CLI::App*, SfctlRun>> runs;
  SfctlRun selected;
};

std::unique_ptr<Parsed> Parse(std::vector<std::string> args) {
  auto p = std::make_unique<Parsed>();
  for (const SfctlCommand& c : SfctlCommands()) {
    CLI::App* sub = p->app.add_subcommand(c.name, c.description);
    p->runs.emplace_back(sub, c.bind(sub));
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  p->app.parse(reversed);
  for (auto& [sub, run] : p->runs) {
    if (sub->parsed()) p->selected = run;
  }
  return p;
}

TEST_CASE("the table holds every subcommand once, in --help's order") {
  std::vector<std::string> names;
  for (const SfctlCommand& c : SfctlCommands()) {
    names.push_back(c.name);
    CHECK_FALSE(c.description.empty());
  }
  CHECK(names == std::vector<std::string>{"jobs", "suspects", "steps", "watch", "health", "nodes",
                                          "capture", "captures", "capture-report", "capture-fetch",
                                          "control", "selftest", "export"});
}

TEST_CASE("flags bind to the selected subcommand") {
  CHECK_THROWS(Parse({"suspects"}));  // --job is required
  CHECK_THROWS(Parse({"nodes", "--class", "sick"}));
  auto p = Parse({"steps", "--job", "j", "--from", "3"});
  CHECK(p->selected != nullptr);
}

TEST_CASE("usage errors after parsing exit 2 before any call") {
  SfctlCall call;  // no stub: a call would crash
  CHECK(Parse({"control", "--job", "j", "--pause", "--resume"})->selected(call) == 2);
  CHECK(Parse({"control", "--job", "j"})->selected(call) == 2);
  CHECK(
      Parse({"control", "--job", "j", "--trace-rank", "1", "--trace-steps", "5"})->selected(call) ==
      2);
  CHECK(Parse({"capture", "--job", "j", "--ranks", "1,x"})->selected(call) == 2);
  CHECK(Parse({"selftest", "--job", "j"})->selected(call) == 2);
  CHECK(Parse({"export", "--job", "j", "--ranks", "a"})->selected(call) == 2);
}

TEST_CASE("an unreachable coordinator exits 3") {
  auto stub =
      v1::Query::NewStub(grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()));
  SfctlCall call;
  call.stub = stub.get();
  call.globals.coordinator = "127.0.0.1:1";
  call.globals.timeout_s = 2;
  std::ostringstream out;
  call.out = &out;
  CHECK(Parse({"jobs"})->selected(call) == 3);
  CHECK(out.str().empty());
}

}  // namespace
}  // namespace stagefrontier
