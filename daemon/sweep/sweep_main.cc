// stagefrontier-sweep: qualifies a node before it joins production work (Guard's offline
// sweep). Runs a short fixed battery (CPU, memory bandwidth, local disk read, loopback
// network; GPU copies, GEMM and an NCCL all-reduce where a GPU is present, skipped otherwise),
// prints the figures and, given --coordinator, the verdict of each against the fleet's
// distribution the coordinator keeps (docs/operations.md "Node sweep").
// Exit status: 0 the node passes (or, without --coordinator, every check ran); 1 a check
// failed or fell below the fleet; 2 usage; 3 the coordinator could not be reached (figures
// printed, not judged).
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "daemon/common/command_line.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/host_name.h"
#include "daemon/common/proto_json.h"
#include "daemon/sweep/gpu_checks.h"
#include "daemon/sweep/host_checks.h"
#include "grpcpp/grpcpp.h"
#include "stagefrontier/v1/query.grpc.pb.h"

namespace {

using namespace stagefrontier;

std::string Render(const v1::SweepReport& report, const v1::SweepJudgement* judged) {
  std::string out = absl::StrFormat("node %s%s\n", report.node(),
                                    judged == nullptr ? " (not judged: no coordinator)"
                                                      : (judged->passed() ? ": PASS" : ": FAIL"));
  absl::StrAppend(
      &out, absl::StrFormat("%-20s %12s %-8s %-9s %-9s %12s %12s  %s\n", "CHECK", "VALUE", "UNIT",
                            "STATE", "VERDICT", "FLEET MEDIAN", "FAIL BELOW", "DETAIL"));
  for (int i = 0; i < report.checks_size(); ++i) {
    const v1::SweepCheck& c = report.checks(i);
    const v1::SweepCheckJudgement* j =
        judged != nullptr && i < judged->checks_size() ? &judged->checks(i) : nullptr;
    const bool judged_rate = j != nullptr && j->fleet_samples() > 0 && j->fleet_median() > 0;
    absl::StrAppend(
        &out, absl::StrFormat("%-20s %12.2f %-8s %-9s %-9s %12s %12s  %s\n", c.name(), c.value(),
                              c.unit(), c.state(), j != nullptr ? j->verdict() : "-",
                              judged_rate ? absl::StrFormat("%.2f", j->fleet_median()) : "-",
                              judged_rate ? absl::StrFormat("%.2f", j->threshold()) : "-",
                              j != nullptr && !j->detail().empty() && j->verdict() != "skipped"
                                  ? j->detail()
                                  : c.detail()));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stagefrontier-sweep: qualify this node against the fleet", "stagefrontier-sweep"};
  std::string coordinator, token_file, node = HostName(), scratch = "/var/tmp", log_level;
  std::string checks_csv = "cpu,memory,disk,loopback,gpu";
  TlsFiles tls;
  bool quick = false, json = false;
  int timeout_s = 30;
  app.add_option("--coordinator", coordinator,
                 "judge against the fleet baseline this coordinator keeps (none: figures only)");
  app.add_option("--token-file", token_file, "the coordinator's shared token");
  app.add_option("--tls-ca", tls.ca, "verify the coordinator with this CA (enables TLS)");
  app.add_option("--tls-cert", tls.cert, "client certificate (mutual TLS)");
  app.add_option("--tls-key", tls.key, "client key (mutual TLS)");
  app.add_option("--node", node, "this node's name (as the sidecar's --node)")
      ->capture_default_str();
  app.add_option("--scratch", scratch, "directory for the disk check (a local disk, not tmpfs)")
      ->capture_default_str();
  app.add_option("--checks", checks_csv, "which checks: cpu, memory, disk, loopback, gpu")
      ->capture_default_str();
  app.add_flag("--quick", quick, "a tenth of the work (CI, smoke tests)");
  app.add_flag("--json", json, "print the report and the judgement as JSON");
  app.add_option("--timeout", timeout_s, "seconds to wait for the coordinator")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  AddLogLevelFlag(app, &log_level);
  if (int rc = ParseCommandLine(app, argc, argv); rc >= 0) return rc;

  std::vector<std::string> wanted = absl::StrSplit(checks_csv, ',', absl::SkipEmpty());
  for (const std::string& w : wanted) {
    if (w != "cpu" && w != "memory" && w != "disk" && w != "loopback" && w != "gpu") {
      std::cerr << "stagefrontier-sweep: --checks: unknown check \"" << w
                << "\" (cpu, memory, disk, loopback, gpu)\n";
      return 2;
    }
  }
  const auto want = [&](const char* c) {
    return std::find(wanted.begin(), wanted.end(), c) != wanted.end();
  };
  const double scale = quick ? 0.1 : 1.0;
  std::vector<SweepCheckResult> results;
  if (want("cpu")) results.push_back(CpuCheck(scale));
  if (want("memory")) results.push_back(MemoryBandwidthCheck(scale));
  if (want("disk")) results.push_back(DiskReadCheck(scratch, scale));
  if (want("loopback")) results.push_back(LoopbackCheck(scale));
  if (want("gpu")) {
    for (SweepCheckResult& r : GpuChecks(scale)) results.push_back(std::move(r));
  }
  v1::SweepReport report;
  report.set_node(node);
  bool all_ran = true;
  for (const SweepCheckResult& r : results) {
    v1::SweepCheck* c = report.add_checks();
    c->set_name(r.name);
    c->set_unit(r.unit);
    c->set_value(r.value);
    c->set_state(r.state);
    c->set_detail(r.detail);
    all_ran = all_ran && r.state != "failed";
  }

  if (coordinator.empty()) {
    std::cout << (json ? ProtoToJson(report) + "\n" : Render(report, nullptr));
    return all_ran ? 0 : 1;
  }
  absl::StatusOr<std::string> token = ReadTokenFile(token_file);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds = ChannelCredentials(tls);
  if (!token.ok() || !creds.ok()) {
    std::cerr << "stagefrontier-sweep: "
              << (!token.ok() ? token.status().message() : creds.status().message()) << "\n";
    return 2;
  }
  auto stub = v1::Query::NewStub(grpc::CreateChannel(coordinator, *creds));
  grpc::ClientContext ctx;
  AttachToken(&ctx, *token);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(timeout_s));
  v1::SweepJudgement judged;
  const grpc::Status s = stub->ReportSweep(&ctx, report, &judged);
  if (!s.ok()) {
    std::cout << (json ? ProtoToJson(report) + "\n" : Render(report, nullptr));
    const bool unreachable =
        s.error_code() == grpc::UNAVAILABLE || s.error_code() == grpc::DEADLINE_EXCEEDED;
    std::cerr << "stagefrontier-sweep: " << (unreachable ? "cannot reach the coordinator at " : "")
              << (unreachable ? coordinator + ": " : "") << s.error_message() << "\n";
    return unreachable ? 3 : 1;
  }
  if (json) {
    std::cout << "{\"report\":" << ProtoToJson(report) << ",\"judgement\":" << ProtoToJson(judged)
              << "}\n";
  } else {
    std::cout << Render(report, &judged);
  }
  return judged.passed() ? 0 : 1;
}
