// sfctl: asks the coordinator where to look. Text tables by default, --json for scripts.
// Exit status: 0 ok, 1 the coordinator refused (unknown job, bad argument...), 2 usage,
// 3 the coordinator is unreachable. docs/cli.md.
#include <iostream>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "daemon/common/command_line.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/proto_json.h"
#include "daemon/nodes/nodes_text.h"
#include "daemon/sfctl/sfctl_captures.h"
#include "daemon/sfctl/sfctl_export.h"
#include "daemon/sfctl/sfctl_render.h"
#include "daemon/sfctl/sfctl_selftest.h"
#include "daemon/sfctl/sfctl_status.h"
#include "grpcpp/grpcpp.h"
#include "stagefrontier/v1/query.grpc.pb.h"

namespace {

using namespace stagefrontier;

struct Common {
  std::string coordinator = "127.0.0.1:7311";
  std::string token_file;
  TlsFiles tls;
  int timeout_s = 10;
  bool json = false;
};

int Report(const grpc::Status& s, const Common& c) {
  return s.ok() ? 0 : ReportCallError(s, c.coordinator);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sfctl: ask the StageFrontier coordinator which stage on which rank to look at",
               "sfctl"};
  app.require_subcommand(1);
  app.fallthrough();  // global flags (--json, --coordinator...) also after the subcommand
  Common c;
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

  std::string job;
  int window = 0;
  int64_t from = 0, to = INT64_MAX;
  int limit = 0, count = 0;
  int64_t after = 0;
  auto* jobs_cmd = app.add_subcommand("jobs", "list jobs");
  auto* suspects = app.add_subcommand("suspects", "verdict and suspects of a job's window");
  suspects->add_option("--job", job, "job id")->required();
  suspects->add_option("--window", window, "re-account the last N steps (0: current window)");
  auto* steps = app.add_subcommand("steps", "per-step accounting");
  steps->add_option("--job", job, "job id")->required();
  steps->add_option("--from", from, "first step");
  steps->add_option("--to", to, "last step");
  steps->add_option("--limit", limit, "at most this many steps (default 1000)");
  auto* watch = app.add_subcommand("watch", "print verdicts as windows close");
  watch->add_option("--job", job, "job id")->required();
  watch->add_option("--count", count, "stop after this many verdicts (0: never)");
  watch->add_option("--after", after, "start after this verdict sequence number");
  auto* health = app.add_subcommand("health", "per-rank health");
  health->add_option("--job", job, "job id")->required();
  auto* nodes = app.add_subcommand("nodes", "the node ledger: what each node cost, across jobs");
  std::string node_class;
  nodes->add_option("--limit", limit, "at most this many nodes (0: all)")
      ->check(CLI::NonNegativeNumber);
  nodes->add_option("--class", node_class, "only nodes of this class")
      ->check(CLI::IsMember({"healthy", "transient", "chronic"}));
  auto* capture = app.add_subcommand(
      "capture",
      "ask ranks for a profiler capture of the same future steps (one per job at a time)");
  capture->add_option("--job", job, "job id")->required();
  std::string capture_ranks;
  uint32_t capture_steps = 0;
  capture->add_option("--ranks", capture_ranks, "comma-separated ranks, e.g. 3,7")->required();
  capture->add_option("--steps", capture_steps, "steps to capture (default: the coordinator's)");
  auto* captures = app.add_subcommand(
      "captures", "the capture policy's decisions for a job: asked, and why not");
  captures->add_option("--job", job, "job id")->required();
  CaptureReportOptions cr;
  auto* capture_report = app.add_subcommand(
      "capture-report", "what a capture found: the operator report, once every rank's file came");
  capture_report->add_option("--job", cr.job, "job id")->required();
  capture_report->add_option("--capture", cr.capture, "capture id (sfctl captures)")->required();
  capture_report->add_option("--wait", cr.wait_s, "while it waits for files, ask again for S s")
      ->check(CLI::Range(0, 86400));
  auto* capture_fetch = app.add_subcommand(
      "capture-fetch", "download a capture's trace files (open them in ui.perfetto.dev)");
  capture_fetch->add_option("--job", cr.job, "job id")->required();
  capture_fetch->add_option("--capture", cr.capture, "capture id (sfctl captures)")->required();
  capture_fetch->add_option("--out", cr.out_dir, "directory for the files")->capture_default_str();
  auto* control = app.add_subcommand("control", "runtime control of a job");
  control->add_option("--job", job, "job id")->required();
  bool pause = false, resume = false;
  uint32_t sample = 0;
  int trace_rank = -1;
  std::string trace_steps;
  v1::ConfigChange config;
  int window_steps = 0;
  double excess_z = 0, clear_share = 0;
  control->add_flag("--pause", pause, "stop stub recording");
  control->add_flag("--resume", resume, "resume stub recording");
  control->add_option("--sample-every", sample, "stubs record one step in N");
  control->add_option("--trace-rank", trace_rank, "ask this rank for a detailed trace");
  control->add_option("--trace-steps", trace_steps, "of steps FIRST:LAST");
  control->add_option("--window-steps", window_steps, "new verdict window");
  control->add_option("--excess-z", excess_z, "new excess threshold in noise scales");
  control->add_option("--clear-share", clear_share, "new CLEAR share");
  SelfTestOptions st;
  std::string st_ranks, st_stages;
  auto* selftest = app.add_subcommand(
      "selftest", "add a known delay on one rank and check that the verdict finds it");
  selftest->add_option("--job", st.job, "job id")->required();
  selftest->add_option("--rank", st.rank, "the rank to delay");
  selftest->add_option("--stage", st.stage, "the stage to delay");
  selftest->add_option("--delay-ms", st.delay_ms, "delay per step (1..1000)")
      ->capture_default_str();
  selftest->add_option("--steps", st.steps, "steps to delay (1..1000)")->capture_default_str();
  selftest->add_option("--lead-steps", st.lead_steps,
                       "start this many steps ahead (0: the coordinator picks)");
  selftest->add_option("--wait", st.wait_s, "seconds to wait for one probe's result")
      ->capture_default_str();
  selftest->add_flag("--sweep", st.sweep, "probe several stages and ranks; print the rates");
  selftest->add_option("--ranks", st_ranks, "sweep: ranks, comma-separated (default 0,mid,last)");
  selftest->add_option("--stages", st_stages, "sweep: stages, comma-separated (default non-sync)");
  selftest->add_option("--cancel", st.cancel_id,
                       "cancel self-test ID of the job (its rank stops delaying at once)");
  selftest->add_flag("--list", st.list, "list the job's self-tests and their states");
  ExportOptions ex;
  std::string ex_ranks;
  auto* export_cmd = app.add_subcommand(
      "export", "a job's steps as a trace for ui.perfetto.dev (Chrome trace JSON)");
  export_cmd->add_option("--job", ex.job, "job id")->required();
  export_cmd->add_option("--from", ex.from, "first step");
  export_cmd->add_option("--to", ex.to, "last step");
  export_cmd->add_option("--format", ex.format, "perfetto, or chrome (the same document)")
      ->capture_default_str();
  export_cmd->add_option("--output", ex.output, "write to this file (default: standard output)");
  export_cmd->add_option("--ranks", ex_ranks, "only these ranks' tracks, comma-separated");
  // Usage errors exit 2, as documented (CLI11's own codes are 100 and up).
  if (int rc = ParseCommandLine(app, argc, argv); rc >= 0) return rc;

  absl::StatusOr<std::string> token = ReadTokenFile(c.token_file);
  if (!token.ok()) {
    std::cerr << "sfctl: " << token.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds = ChannelCredentials(c.tls);
  if (!creds.ok()) {
    std::cerr << "sfctl: " << creds.status().message() << "\n";
    return 2;
  }
  auto stub = v1::Query::NewStub(grpc::CreateChannel(c.coordinator, *creds));
  if (selftest->parsed()) {
    st.json = c.json;
    st.call_timeout_s = c.timeout_s;
    if (st.cancel_id == 0 && !st.list && !st.sweep && (st.rank < 0 || st.stage.empty())) {
      std::cerr << "sfctl: selftest wants --rank and --stage (or --sweep)\n";
      return 2;
    }
    for (absl::string_view r : absl::StrSplit(st_ranks, ',', absl::SkipEmpty())) {
      int32_t v = 0;
      if (!absl::SimpleAtoi(r, &v)) {
        std::cerr << "sfctl: --ranks wants numbers, got \"" << r << "\"\n";
        return 2;
      }
      st.ranks.push_back(v);
    }
    for (absl::string_view s : absl::StrSplit(st_stages, ',', absl::SkipEmpty())) {
      st.stages.emplace_back(s);
    }
    return RunSelfTest(*stub, *token, st, std::cout);
  }
  if (export_cmd->parsed()) {
    ex.call_timeout_s = c.timeout_s;
    for (absl::string_view r : absl::StrSplit(ex_ranks, ',', absl::SkipEmpty())) {
      int32_t v = 0;
      if (!absl::SimpleAtoi(r, &v)) {
        std::cerr << "sfctl: --ranks wants numbers, got \"" << r << "\"\n";
        return 2;
      }
      ex.ranks.push_back(v);
    }
    return RunExport(*stub, *token, ex, std::cout);
  }
  if (capture_report->parsed() || capture_fetch->parsed()) {
    cr.json = c.json;
    cr.call_timeout_s = c.timeout_s;
    return capture_report->parsed() ? RunCaptureReport(*stub, *token, cr, std::cout)
                                    : RunCaptureFetch(*stub, *token, cr, std::cout);
  }
  grpc::ClientContext ctx;
  AttachToken(&ctx, *token);
  if (!watch->parsed()) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(c.timeout_s));
  }
  const auto print = [&](const google::protobuf::Message& m, const std::string& text) {
    std::cout << (c.json ? ProtoToJson(m) + "\n" : text);
  };

  if (jobs_cmd->parsed()) {
    v1::ListJobsReply r;
    grpc::Status s = stub->ListJobs(&ctx, v1::ListJobsRequest(), &r);
    if (s.ok()) print(r, RenderJobs(r));
    return Report(s, c);
  }
  if (suspects->parsed()) {
    v1::GetSuspectsRequest req;
    req.set_job(job);
    req.set_window(window);
    v1::SuspectsReply r;
    grpc::Status s = stub->GetSuspects(&ctx, req, &r);
    if (s.ok()) print(r, RenderSuspects(r));
    return Report(s, c);
  }
  if (steps->parsed()) {
    v1::GetStepsRequest req;
    req.set_job(job);
    req.set_from_step(from);
    req.set_to_step(to);
    req.set_limit(limit);
    v1::GetStepsReply r;
    grpc::Status s = stub->GetSteps(&ctx, req, &r);
    if (s.ok()) print(r, RenderSteps(r));
    return Report(s, c);
  }
  if (health->parsed()) {
    v1::GetHealthRequest req;
    req.set_job(job);
    v1::GetHealthReply r;
    grpc::Status s = stub->GetHealth(&ctx, req, &r);
    if (s.ok()) print(r, RenderHealth(r));
    return Report(s, c);
  }
  if (nodes->parsed()) {
    v1::ListNodesRequest req;
    req.set_limit(limit);
    req.set_node_class(node_class);
    v1::ListNodesReply r;
    grpc::Status s = stub->ListNodes(&ctx, req, &r);
    if (s.ok()) print(r, RenderNodesText(r));
    return Report(s, c);
  }
  if (watch->parsed()) {
    v1::WatchVerdictsRequest req;
    req.set_job(job);
    req.set_after_seq(after);
    auto reader = stub->WatchVerdicts(&ctx, req);
    v1::VerdictEvent ev;
    int seen = 0;
    while (reader->Read(&ev)) {
      print(ev, absl::StrCat("#", ev.seq(), " ", RenderVerdict(ev.verdict())));
      std::cout.flush();
      if (count > 0 && ++seen >= count) {
        ctx.TryCancel();
        break;
      }
    }
    grpc::Status s = reader->Finish();
    if (count > 0 && seen >= count) return 0;
    return Report(s, c);
  }
  if (capture->parsed()) {
    v1::ControlCommand cmd;
    cmd.set_job(job);
    for (absl::string_view r : absl::StrSplit(capture_ranks, ',', absl::SkipEmpty())) {
      int32_t v = 0;
      if (!absl::SimpleAtoi(r, &v)) {
        std::cerr << "sfctl: --ranks wants numbers, got \"" << r << "\"\n";
        return 2;
      }
      cmd.mutable_capture()->add_ranks(v);
    }
    cmd.mutable_capture()->set_steps(capture_steps);
    v1::ControlReply r;
    grpc::Status s = stub->Control(&ctx, cmd, &r);
    if (s.ok()) print(r, r.message() + "\n");
    return Report(s, c);
  }
  if (captures->parsed()) {
    v1::ListCapturesRequest req;
    req.set_job(job);
    v1::ListCapturesReply r;
    grpc::Status s = stub->ListCaptures(&ctx, req, &r);
    if (s.ok()) print(r, RenderCaptures(r));
    return Report(s, c);
  }
  if (control->parsed()) {
    v1::ControlCommand cmd;
    cmd.set_job(job);
    int actions = 0;
    if (pause) ++actions, cmd.set_pause(true);
    if (resume) ++actions, cmd.set_resume(true);
    if (sample > 0) ++actions, cmd.set_sample_every(sample);
    if (trace_rank >= 0) {
      ++actions;
      std::vector<std::string> parts = absl::StrSplit(trace_steps, ':');
      int64_t first = 0, last = 0;
      if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &first) ||
          !absl::SimpleAtoi(parts[1], &last)) {
        std::cerr << "sfctl: --trace-steps wants FIRST:LAST, got \"" << trace_steps << "\"\n";
        return 2;
      }
      cmd.mutable_trace()->set_rank(trace_rank);
      cmd.mutable_trace()->set_first_step(first);
      cmd.mutable_trace()->set_last_step(last);
    }
    if (window_steps > 0 || excess_z > 0 || clear_share > 0) {
      ++actions;
      cmd.mutable_config()->set_window_steps(window_steps);
      cmd.mutable_config()->set_excess_z(excess_z);
      cmd.mutable_config()->set_clear_share(clear_share);
    }
    if (actions != 1) {
      std::cerr << "sfctl: control wants exactly one action (--pause, --resume, --sample-every, "
                   "--trace-rank with --trace-steps, or thresholds)\n";
      return 2;
    }
    v1::ControlReply r;
    grpc::Status s = stub->Control(&ctx, cmd, &r);
    if (s.ok()) print(r, r.message() + "\n");
    return Report(s, c);
  }
  return 2;
}
