// What every sfctl subcommand is: a name, a description, flags bound to state of its own and
// a run function, so that main is a dispatch table (sfctl_commands.h). A subcommand's run gets
// the global flags, the stub and the token, and returns the exit status of docs/cli.md.
//
//   SfctlCommand JobsCommand() {
//     return {"jobs", "list jobs", [](CLI::App*) {
//               return [](const SfctlCall& call) { ... return call.Report(status); };
//             }};
//   }
#ifndef STAGEFRONTIER_DAEMON_SFCTL_SFCTL_COMMAND_H_
#define STAGEFRONTIER_DAEMON_SFCTL_SFCTL_COMMAND_H_

#include <cstdint>
#include <functional>
#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/string_view.h"
#include "daemon/common/grpc_security.h"
#include "google/protobuf/message.h"
#include "grpcpp/grpcpp.h"
#include "stagefrontier/v1/query.grpc.pb.h"

namespace stagefrontier {

// The flags every subcommand shares (before or after the subcommand's name).
struct SfctlGlobals {
  std::string coordinator = "127.0.0.1:7311";
  std::string token_file;
  TlsFiles tls;
  int timeout_s = 10;
  bool json = false;
};

// One run of a subcommand: what it calls and where it prints.
struct SfctlCall {
  v1::Query::Stub* stub = nullptr;
  std::string token;
  SfctlGlobals globals;
  std::ostream* out = &std::cout;

  // A unary call's context: the token, and the --timeout deadline unless `deadline` is false.
  void Prepare(grpc::ClientContext* ctx, bool deadline = true) const;
  // The reply as JSON with --json, else `text`.
  void Print(const google::protobuf::Message& m, const std::string& text) const;
  // 0 when `s` is OK, else the message on standard error and 1 or 3 (sfctl_status.h).
  int Report(const grpc::Status& s) const;
  // One unary query: Prepare, call `method` of the stub, Print the reply (as `render(reply)`
  // without --json), Report.
  //   return call.Unary(&v1::Query::Stub::GetHealth, request, RenderHealth);
  template <typename Request, typename Reply, typename Render>
  int Unary(grpc::Status (v1::Query::Stub::*method)(grpc::ClientContext*, const Request&, Reply*),
            const Request& request, Render render) const {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    Reply reply;
    grpc::Status s = (stub->*method)(&ctx, request, &reply);
    if (s.ok()) Print(reply, render(reply));
    return Report(s);
  }
};

// Prints "sfctl: <what>" on standard error; returns the usage exit status (2).
int SfctlUsageError(const std::string& what);

// Parses "3,7" into ranks; false with `bad` set to the first piece that is not a number.
bool ParseRankList(absl::string_view csv, std::vector<int32_t>* ranks, std::string* bad);

using SfctlRun = std::function<int(const SfctlCall&)>;

struct SfctlCommand {
  std::string name;
  std::string description;
  // Adds the subcommand's flags to `sub`, bound to state the returned run function keeps.
  std::function<SfctlRun(CLI::App* sub)> bind;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_SFCTL_COMMAND_H_
