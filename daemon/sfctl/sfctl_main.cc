// sfctl: asks the coordinator where to look. Text tables by default, --json for scripts.
// Exit status: 0 ok, 1 the coordinator refused (unknown job, bad argument...), 2 usage,
// 3 the coordinator is unreachable. docs/cli.md.
//
// The composition root: the global flags, the subcommands' table (sfctl_commands.h), the
// channel, then the one subcommand the line selected.
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "daemon/common/command_line.h"
#include "daemon/common/grpc_security.h"
#include "daemon/sfctl/sfctl_command.h"
#include "daemon/sfctl/sfctl_commands.h"
#include "daemon/sfctl/terminal_safe.h"
#include "grpcpp/grpcpp.h"
#include "stagefrontier/v1/query.grpc.pb.h"

namespace {

// Puts a TerminalSafeBuf in front of a standard stream for main's duration.
class SafeStream {
 public:
  explicit SafeStream(std::ostream& s) : stream_(s), safe_(s.rdbuf()), was_(s.rdbuf(&safe_)) {}
  ~SafeStream() {
    stream_.flush();
    stream_.rdbuf(was_);
  }

 private:
  std::ostream& stream_;
  stagefrontier::TerminalSafeBuf safe_;
  std::streambuf* was_;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace stagefrontier;
  // Text from others (node names, errors relayed) never drives the terminal.
  const SafeStream out(std::cout), err(std::cerr);
  CLI::App app{"sfctl: ask the StageFrontier coordinator which stage on which rank to look at",
               "sfctl"};
  app.require_subcommand(1);
  app.fallthrough();  // global flags (--json, --coordinator...) also after the subcommand
  SfctlCall call;
  SfctlGlobals& c = call.globals;
  app.add_option("--coordinator", c.coordinator, "coordinator gRPC address")
      ->check(CLI::Validator(
          [](std::string& v) { return v.empty() ? std::string("an address is needed") : ""; },
          "ADDRESS"))
      ->capture_default_str();
  app.add_option("--token-file", c.token_file, "shared token file");
  app.add_option("--tls-ca", c.tls.ca, "verify the coordinator with this CA (enables TLS)");
  app.add_option("--tls-cert", c.tls.cert, "client certificate (mutual TLS)");
  app.add_option("--tls-key", c.tls.key, "client key (mutual TLS)");
  app.add_option("--timeout", c.timeout_s, "seconds to wait for an answer (1..86400)")
      ->check(CLI::Range(1, 86'400))
      ->capture_default_str();
  app.add_flag("--json", c.json, "print the reply as JSON (proto3 mapping)");
  std::vector<std::pair<CLI::App*, SfctlRun>> runs;
  for (const SfctlCommand& command : SfctlCommands()) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    runs.emplace_back(sub, command.bind(sub));
  }
  // Usage errors exit 2, as documented (CLI11's own codes are 100 and up).
  if (int rc = ParseCommandLine(app, argc, argv); rc >= 0) return rc;

  absl::StatusOr<std::string> token = ReadTokenFile(c.token_file);
  if (!token.ok()) return SfctlUsageError(std::string(token.status().message()));
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds = ChannelCredentials(c.tls);
  if (!creds.ok()) return SfctlUsageError(std::string(creds.status().message()));
  auto stub = v1::Query::NewStub(grpc::CreateChannel(c.coordinator, *creds));
  call.stub = stub.get();
  call.token = *token;
  for (auto& [sub, run] : runs) {
    if (sub->parsed()) return run(call);
  }
  return 2;
}
