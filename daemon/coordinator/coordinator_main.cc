// stagefrontier-coordinator: accepts sidecar streams, aligns steps across ranks, accounts
// them, decides verdicts, answers queries and serves /metrics. docs/operations.md.
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "daemon/accounting/probe_bracketing.h"
#include "daemon/captures/capture_analysis_child.h"
#include "daemon/captures/capture_metrics.h"
#include "daemon/captures/capture_reports.h"
#include "daemon/captures/capture_store.h"
#include "daemon/captures/capture_trigger.h"
#include "daemon/captures/capture_upload_service.h"
#include "daemon/common/access_tokens.h"
#include "daemon/common/command_line.h"
#include "daemon/common/descriptor_limit.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/termination_signals.h"
#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/coordinator/data_dir_lock.h"
#include "daemon/coordinator/health_service.h"
#include "daemon/coordinator/ingest_service.h"
#include "daemon/coordinator/job_registry.h"
#include "daemon/coordinator/query_service.h"
#include "daemon/coordinator/resource_limits.h"
#include "daemon/coordinator/sidecar_sessions.h"
#include "daemon/nodes/drain_hook.h"
#include "daemon/nodes/node_ledger.h"
#include "daemon/nodes/node_metrics.h"
#include "daemon/sweep/fleet_baseline.h"
#include "daemon/web/query_bridge.h"
#include "daemon/web/web_metrics.h"
#include "daemon/web/web_server.h"
#include "grpcpp/grpcpp.h"
#include "prometheus/exposer.h"
#include "shm/monotonic_clock.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  using namespace stagefrontier;
  // A capture's analysis runs in a child process of this binary (capture_analysis_child.h).
  if (std::optional<int> rc = RunCaptureAnalysisChildIfAsked(argc, argv)) return *rc;
  // Debian's Abseil is built with assertions, which turns on absl::Mutex deadlock detection
  // (a lock graph updated at every lock gRPC takes): measurable on the ingest path of
  // thousands of streams. The project's own tests keep it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"stagefrontier-coordinator: frontier accounting, verdicts and queries",
               "stagefrontier-coordinator"};
  std::string listen = "127.0.0.1:7311";
  std::string metrics_listen = "127.0.0.1:7312";
  std::string health_listen;
  std::string http_listen;
  std::string data_dir;
  bool no_fsync = false;
  std::string jobs_csv;
  int64_t deadline_ms = 5000;
  double journal_compact_mb = 64;
  int window_steps = 100;
  std::string probe_bracket;
  std::string token_file;
  TlsFiles tls;
  int max_message_bytes = 16 << 20;
  std::string log_level;
  ResourceLimits limits;
  int64_t max_job_memory_mb = limits.max_job_memory_bytes >> 20;
  int64_t max_memory_mb = 0;
  int64_t node_metrics_max = 1000;
  DrainHookOptions drain;
  int64_t drain_timeout_s = 30;
  app.add_option("--listen", listen, "gRPC address (ingest and query)")
      ->check(ListenAddress(false))
      ->capture_default_str();
  app.add_option("--metrics-listen", metrics_listen, "Prometheus /metrics address; empty disables")
      ->check(ListenAddress(true))
      ->capture_default_str();
  app.add_option("--http-listen", http_listen,
                 "serve the web view (jobs, verdicts, charts, rank health, captures) on this "
                 "IPv4 HOST:PORT; off by default. Same TLS files and token as the gRPC port")
      ->check(ListenAddress(true));
  app.add_option("--health-listen", health_listen,
                 "also serve gRPC health checking (grpc.health.v1) in plaintext here, for probes "
                 "that cannot speak TLS (Kubernetes grpc probes); empty: only on --listen")
      ->check(ListenAddress(true));
  app.add_option("--data-dir", data_dir, "directory of the job journals (created if missing)")
      ->required();
  app.add_flag("--no-fsync", no_fsync,
               "acknowledge batches without fdatasync (faster; a machine crash may lose them)");
  app.add_option("--journal-compact-mb", journal_compact_mb,
                 "move a job's journal records into compact record blocks once this many MB of "
                 "plain records were written (while running); 0: never")
      ->check(CLI::Range(0.0, 1'000'000.0))
      ->capture_default_str();
  app.add_option("--jobs", jobs_csv, "comma-separated job ids to accept; default: any");
  app.add_option("--step-deadline-ms", deadline_ms,
                 "close a step as partial this long after its first record")
      ->check(CLI::Range(int64_t{1}, int64_t{3'600'000}))
      ->capture_default_str();
  app.add_option("--window-steps", window_steps, "steps per verdict window")
      ->check(CLI::Range(2, 1'000'000))
      ->capture_default_str();
  app.add_option("--probe-bracket", probe_bracket,
                 "which stages may contain which collectives, e.g. "
                 "\"all_reduce:grad_sync|backward,all_gather:forward\"; default: any collective "
                 "in any sync or mixed stage (docs/probe.md)");
  app.add_option("--token-file", token_file, "require this shared token from every client");
  std::string token_scopes_file;
  app.add_option("--token-scopes-file", token_scopes_file,
                 "narrower tokens for sfctl and the web view, a line each: \"read TOKEN\", "
                 "\"control TOKEN\" or \"job:JOB TOKEN\" (docs/operations.md, Security)");
  app.add_option("--tls-cert", tls.cert, "serve TLS with this PEM certificate");
  app.add_option("--tls-key", tls.key, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", tls.ca, "require client certificates signed by this CA");
  app.add_option("--max-message-bytes", max_message_bytes, "largest message accepted")
      ->check(CLI::Range(1024, 1 << 30))
      ->capture_default_str();
  // Resource limits (docs/operations.md, "Resource model").
  app.add_option("--max-world-size", limits.max_world_size, "largest world size a job may declare")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  app.add_option("--max-job-memory-mb", max_job_memory_mb,
                 "largest estimated memory of one job (world size x stages x window)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--max-memory-mb", max_memory_mb,
                 "memory all jobs together may reserve; 0: three quarters of this machine's")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--max-jobs", limits.max_jobs, "jobs this coordinator holds at most")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-jobs-per-stream", limits.max_jobs_per_stream,
                 "jobs one sidecar stream may declare ranks of")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-streams", limits.max_streams, "concurrent sidecar streams")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  app.add_option("--hello-timeout-ms", limits.hello_timeout_ms,
                 "a stream must say Hello this soon after opening")
      ->check(CLI::Range(int64_t{10}, int64_t{3'600'000}))
      ->capture_default_str();
  app.add_option("--max-stream-queue", limits.max_stream_queue,
                 "messages queued for a stream that does not read them before it is cut off")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--node-metrics-max", node_metrics_max,
                 "per-node /metrics series for at most this many charged nodes")
      ->check(CLI::Range(int64_t{0}, int64_t{100'000}))
      ->capture_default_str();
  app.add_option("--drain-command", drain.command,
                 "when a node turns chronic, run this under /bin/sh -c with SF_NODE, SF_REASON... "
                 "in its environment (dry run unless --drain-execute)");
  app.add_flag("--drain-execute", drain.execute, "really run --drain-command (default: log it)");
  app.add_option("--drain-max-per-hour", drain.max_per_hour,
                 "drain at most this many nodes an hour")
      ->check(CLI::Range(0, 10'000))
      ->capture_default_str();
  app.add_option("--drain-timeout-s", drain_timeout_s, "kill the drain command after this long")
      ->check(CLI::Range(int64_t{1}, int64_t{3600}))
      ->capture_default_str();
  bool captures = true;
  CapturePolicyOptions capture_options;
  app.add_flag("--captures,!--no-captures", captures,
               "after a CLEAR or rank-naming AMBIGUOUS verdict, ask the suspects and reference "
               "ranks whose trainers can take captures (stagefrontier.torch, or C/C++ "
               "callbacks) to capture a profiler trace of the same future steps (on by "
               "default; --no-captures: only captures asked by hand)");
  app.add_option("--capture-steps", capture_options.steps, "steps per capture")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--capture-references", capture_options.references,
                 "reference ranks per capture, on other nodes where possible")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--capture-lead-seconds", capture_options.delivery_seconds,
                 "a capture starts this far ahead at the job's step rate (at least 10 steps), "
                 "so that the request reaches every rank first")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--capture-cooldown-windows", capture_options.cooldown_windows,
                 "verdict windows after a capture before the next one")
      ->check(CLI::Range(0, 1'000'000))
      ->capture_default_str();
  app.add_option("--capture-max-per-hour", capture_options.max_per_hour,
                 "captures per job and hour at most")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  CaptureStoreOptions store_options;
  uint64_t capture_max_mb = store_options.max_file_bytes >> 20;
  uint64_t capture_keep_mb = store_options.max_total_bytes >> 20;
  app.add_option("--capture-max-mb", capture_max_mb,
                 "a capture file larger than this is refused (the sidecar keeps it)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--capture-keep-mb", capture_keep_mb,
                 "collected capture files kept under --data-dir/captures, oldest dropped first")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--capture-keep-files", store_options.max_files, "capture files kept at most")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  uint64_t capture_keep_job_mb = store_options.max_job_bytes >> 20;
  app.add_option("--capture-keep-job-mb", capture_keep_job_mb,
                 "capture bytes kept for one job, uploads in flight included; a job beyond it "
                 "drops its own oldest files, never another job's")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30))
      ->capture_default_str();
  SelfTestLimits selftest_limits;
  app.add_option("--selftest-max-running", selftest_limits.max_running,
                 "self-tests running at once on this coordinator (one per job at most)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--selftest-steps-per-hour", selftest_limits.max_steps_per_hour,
                 "delayed steps self-tests may ask of one job per hour")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}))
      ->capture_default_str();
  int64_t selftest_lease_s = selftest_limits.lease_ns / 1'000'000'000;
  app.add_option("--selftest-lease-s", selftest_lease_s,
                 "cancel a running self-test when nobody asked for its result this long (its "
                 "sfctl went away)")
      ->check(CLI::Range(int64_t{1}, int64_t{3600}))
      ->capture_default_str();
  FleetBaselineOptions fleet_options;
  app.add_option("--sweep-max-drop", fleet_options.max_drop,
                 "a node-sweep figure fails when it lies this fraction (and 4 robust SDs) below "
                 "the fleet's median; raise it on nodes that share their cores")
      ->check(CLI::Range(0.01, 0.99))
      ->capture_default_str();
  AddLogLevelFlag(app, &log_level);
  if (int rc = ParseCommandLine(app, argc, argv); rc >= 0) return rc;
  ApplyLogLevel(log_level);
  limits.max_job_memory_bytes = max_job_memory_mb << 20;
  limits.max_memory_bytes = max_memory_mb << 20;
  // A file-size limit must make journal writes fail (and acks wait), not kill us.
  signal(SIGXFSZ, SIG_IGN);

  // Signals are taken by the main thread; block them before any thread starts.
  BlockTerminationSignals();

  if (::mkdir(data_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    spdlog::error("cannot create data directory {}: {}", data_dir, std::strerror(errno));
    return 2;
  }
  // One coordinator per data directory, held until this process ends.
  absl::StatusOr<DataDirLock> data_dir_lock = DataDirLock::Acquire(data_dir);
  if (!data_dir_lock.ok()) {
    spdlog::error("{}", std::string(data_dir_lock.status().message()));
    return 2;
  }
  absl::StatusOr<std::string> token = ReadTokenFile(token_file);
  if (!token.ok()) {
    spdlog::error("{}", std::string(token.status().message()));
    return 2;
  }
  absl::StatusOr<AccessTokens> access = AccessTokens::Load(*token, token_scopes_file);
  if (!access.ok()) {
    spdlog::error("{}", std::string(access.status().message()));
    return 2;
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = ServerCredentials(tls);
  if (!creds.ok()) {
    spdlog::error("{}", std::string(creds.status().message()));
    return 2;
  }

  {
    // Every sidecar stream is a socket; journals, the ledgers and /metrics need a few more.
    const uint64_t wanted = static_cast<uint64_t>(limits.max_streams) + 256;
    absl::StatusOr<uint64_t> fds = RaiseDescriptorLimit(wanted);
    if (!fds.ok()) {
      spdlog::warn("{}", std::string(fds.status().message()));
    } else if (*fds < wanted) {
      spdlog::warn(
          "only {} open files are allowed (hard limit): fewer than the {} sidecar "
          "streams of --max-streams can connect; raise it (LimitNOFILE=, ulimit -Hn)",
          *fds, limits.max_streams);
    }
  }
  CoordinatorMetrics metrics;
  JobOptions options;
  options.data_dir = data_dir;
  options.fsync = !no_fsync;
  options.aligner.deadline_ns = deadline_ms * 1'000'000;
  options.engine.window_steps = window_steps;
  options.probe_bracket_rules = probe_bracket;
  options.limits = limits;
  MemoryBudget budget(limits.max_memory_bytes);
  options.budget = &budget;
  if (absl::Status s = ProbeBracketing::CheckRules(probe_bracket); !s.ok()) {
    spdlog::error("--probe-bracket: {}", std::string(s.message()));
    return 2;
  }
  if (absl::Status s = options.engine.Validate(); !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return 2;
  }
  NodeLedgerOptions ledger_options;
  ledger_options.path = data_dir + "/nodes.ledger";
  ledger_options.fsync = options.fsync;
  JournalOpenInfo ledger_info;
  absl::StatusOr<std::unique_ptr<NodeLedger>> ledger =
      NodeLedger::Open(ledger_options, &ledger_info);
  if (!ledger.ok()) {
    // Without its ledger the coordinator would forget every node's history: refuse to start.
    spdlog::error("node ledger {}: {}", ledger_options.path,
                  std::string(ledger.status().message()));
    return 2;
  }
  if (ledger_info.records > 0 || !ledger_info.skipped.empty()) {
    spdlog::info("node ledger {}: {}", ledger_options.path, ledger_info.Describe());
  }
  drain.timeout = std::chrono::seconds(drain_timeout_s);
  SidecarSessions sessions;  // the connected sidecars; the drain hook asks it about conflicts
  DrainHook drain_hook(drain, [](const std::string& line) { spdlog::warn("{}", line); });
  drain_hook.SetVeto([&sessions](const std::string& node) { return sessions.InConflict(node); });
  drain_hook.Start();
  (*ledger)->SetClassChange([&drain_hook](const NodeSummary& n, NodeClass before) {
    spdlog::info("node {} is now {} (was {}): {:.1f} GPU-seconds wasted over {} jobs", n.node,
                 NodeClassName(n.cls), NodeClassName(before), n.gpu_seconds, n.jobs_charged);
    drain_hook.OnClassChange(n);
  });
  options.node_ledger = ledger->get();
  CaptureTrigger capture_trigger(capture_options,
                                 [](const std::string& line) { spdlog::info("{}", line); });
  // Always told of windows (the pace and the last named rank serve captures asked by hand);
  // decides on its own only with --captures.
  capture_trigger.set_automatic(captures);
  // Ids go on after those of earlier runs, whose files and reports stay in the store.
  capture_trigger.SeedNextId(CaptureReports::HighestIdIn(data_dir + "/captures") + 1);
  options.verdict_observer = &capture_trigger;
  fleet_options.path = data_dir + "/sweeps.ledger";
  fleet_options.fsync = options.fsync;
  JournalOpenInfo fleet_info;
  absl::StatusOr<std::unique_ptr<FleetBaseline>> fleet =
      FleetBaseline::Open(fleet_options, &fleet_info);
  if (!fleet.ok()) {
    spdlog::error("fleet baseline {}: {}", fleet_options.path,
                  std::string(fleet.status().message()));
    return 2;
  }
  std::set<std::string> allowed;
  for (absl::string_view j : absl::StrSplit(jobs_csv, ',', absl::SkipEmpty())) {
    allowed.insert(std::string(j));
  }
  JobRegistry jobs(options, &metrics, allowed,
                   [](const std::string& line) { spdlog::info("{}", line); });
  if (absl::Status s = jobs.RestoreAll(); !s.ok()) {
    spdlog::error("some journals could not be restored (the others serve): {}",
                  std::string(s.message()));
  }

  std::unique_ptr<prometheus::Exposer> exposer;
  if (!metrics_listen.empty()) {
    try {
      exposer = std::make_unique<prometheus::Exposer>(metrics_listen);
    } catch (const std::exception& e) {
      // CivetWeb says only "null context when constructing CivetServer" when the port is
      // taken: say what is likely.
      spdlog::error(
          "cannot serve /metrics on {}: the address is in use or not this machine's "
          "({}); pick another --metrics-listen, or empty to disable it",
          metrics_listen, e.what());
      return 2;
    }
    exposer->RegisterCollectable(metrics.registry());
  }

  selftest_limits.lease_ns = selftest_lease_s * 1'000'000'000;
  SelfTestBook self_tests(selftest_limits);
  IngestService ingest(
      &jobs, &sessions, &metrics, *token, limits,
      [](const std::string& line) { spdlog::info("{}", line); }, &self_tests);
  ingest.SetNodeLedger(ledger->get());
  ingest.SetCaptureAnswerObserver(&capture_trigger);
  QueryService query(&jobs, &sessions, &metrics, *token, &self_tests, ledger->get(), fleet->get());
  query.SetAccessTokens(*std::move(access));
  query.SetCaptureTrigger(&capture_trigger, captures);
  // Capture files the sidecars send (with or without --captures: captures asked by hand too).
  store_options.root = data_dir + "/captures";
  store_options.max_file_bytes = capture_max_mb << 20;
  store_options.max_total_bytes = capture_keep_mb << 20;
  store_options.max_job_bytes = capture_keep_job_mb << 20;
  CaptureStore capture_store(store_options);
  if (absl::Status s = capture_store.Open(); !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return 2;
  }
  CaptureUploadService capture_uploads(&capture_store, *token,
                                       [](const std::string& line) { spdlog::info("{}", line); });
  // Reports once every rank of a capture has sent its file (on a thread of their own).
  CaptureReports capture_reports(
      &capture_store,
      [&capture_trigger](const std::string& job) { return capture_trigger.Decisions(job); },
      [&jobs](const std::string& job) -> std::optional<StageSchema> {
        std::shared_ptr<JobState> j = jobs.Find(job);
        if (j == nullptr) return std::nullopt;
        return j->schema();
      },
      [](const std::string& line) { spdlog::info("{}", line); });
  capture_store.SetOnComplete(
      [&capture_reports](const StoredCapture& f) { capture_reports.OnFileStored(f); });
  // A rank whose profiler failed will send no file: its capture stops waiting for it.
  // Only files of captures this coordinator asked are taken (a trainer's user cannot fill the
  // store with made-up jobs and evict real evidence).
  capture_store.SetExpected(
      [&capture_reports](const std::string& job, int32_t rank, int64_t first_step) {
        return capture_reports.Expects(job, rank, first_step);
      });
  capture_reports.SetAnswersOf(
      [&capture_trigger](const std::string& job, const CaptureDecision& d) {
        return capture_trigger.Answers(job, d);
      });
  capture_trigger.SetOnRankFailed(
      [&capture_reports](const std::string& job) { capture_reports.Poke(job); });
  // Each capture asked is kept on disk: analysed when its files come, even after a restart.
  capture_trigger.SetOnAsked([&capture_reports](const std::string& job, const CaptureDecision& d) {
    capture_reports.Remember(job, d);
  });
  capture_reports.SetAnalyser(ChildCaptureAnalyser(CaptureAnalysisChildOptions{}));
  capture_reports.Start();
  query.SetCaptureReports(&capture_reports, &capture_store);
  CaptureMetrics capture_metrics(*metrics.registry());
  NodeMetrics node_metrics(*metrics.registry(), static_cast<size_t>(node_metrics_max));
  WebMetrics web_metrics(*metrics.registry());
  HealthService health;
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(listen, *creds, &bound_port);
  // gRPC sets SO_REUSEPORT by default: a second coordinator would bind the same port and take
  // half of the calls. One process per port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  builder.RegisterService(&ingest);
  builder.RegisterService(&query);
  builder.RegisterService(&capture_uploads);
  builder.RegisterService(&health);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    spdlog::error("cannot listen on {} (another process, perhaps another coordinator, may hold it)",
                  listen);
    return 2;
  }
  // Plaintext health checking for probes, served apart from the (possibly TLS) main port.
  std::unique_ptr<grpc::Server> health_server;
  if (!health_listen.empty()) {
    grpc::ServerBuilder hb;
    int health_port = 0;
    hb.AddListeningPort(health_listen, grpc::InsecureServerCredentials(), &health_port);
    hb.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    hb.RegisterService(&health);
    health_server = hb.BuildAndStart();
    if (!health_server || health_port == 0) {
      spdlog::error("cannot serve health checking on {}", health_listen);
      return 2;
    }
  }
  // The web view asks the Query service over an in-process channel: the gRPC API's rules.
  std::unique_ptr<QueryBridge> web_bridge;
  std::unique_ptr<WebServer> web;
  if (!http_listen.empty()) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    web_bridge = std::make_unique<QueryBridge>(server->InProcessChannel(args));
    WebServerOptions web_options;
    web_options.listen = http_listen;
    web_options.tls_cert = tls.cert;
    web_options.tls_key = tls.key;
    web_options.tls_client_ca = tls.ca;
    absl::StatusOr<std::unique_ptr<WebServer>> started = WebServer::Start(
        web_options, [bridge = web_bridge.get()](
                         absl::string_view path, absl::string_view url_query,
                         absl::string_view auth) { return bridge->Get(path, url_query, auth); });
    if (!started.ok()) {
      spdlog::error("{}", std::string(started.status().message()));
      return 2;
    }
    web = std::move(*started);
    spdlog::info("web view on {}://{}", web->tls() ? "https" : "http", http_listen);
  }
  health.SetServing(true);
  spdlog::info("coordinator listening on {} (metrics on {}), data in {}{}", listen,
               metrics_listen.empty() ? "none" : metrics_listen, data_dir,
               token->empty() ? "" : ", token required");

  // Deadlines: close steps whose missing ranks did not report in time.
  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    int64_t nodes_shown_ns = 0;
    int64_t uploads_swept_ns = 0;
    while (!stop) {
      const int64_t now = shm::MonotonicNowNs();
      for (const auto& job : jobs.All()) {
        job->CloseDue(now);
        if (absl::Status s = job->Flush(); !s.ok()) spdlog::error("{}", std::string(s.message()));
      }
      capture_trigger.Flush(&sessions);  // automatic ones (--captures) and those asked by hand
      if (absl::Status s = (*ledger)->Flush(); !s.ok()) {
        spdlog::error("node ledger: {}", std::string(s.message()));
      }
      if (now - nodes_shown_ns >= 1'000'000'000) {
        node_metrics.Update((*ledger)->Nodes(), &drain_hook.counters());
        capture_metrics.Update(capture_trigger.counters(), capture_store.counters(),
                               capture_reports.counters());
        if (web != nullptr) web_metrics.Update(web->counters());
        query.ExpireSelfTests();  // self-tests whose client went away stop delaying the job
        nodes_shown_ns = now;
      }
      if (now - uploads_swept_ns >= 60'000'000'000) {  // uploads their sidecar gave up
        if (const int n = capture_store.RemoveAbandonedUploads(::time(nullptr)); n > 0) {
          spdlog::info("captures: removed {} unfinished upload(s) idle for {} s", n,
                       capture_store.options().abandoned_upload_s);
        }
        uploads_swept_ns = now;
      }
      metrics.memory_reserved().Set(static_cast<double>(budget.used()));
      metrics.memory_budget().Set(static_cast<double>(budget.total()));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });

  // Live journal compaction (docs/journal-format.md "Compaction while running"), on its own
  // thread: ingest, flushes and acks go on meanwhile. A journal that failed waits 10 minutes.
  std::thread compactor([&] {
    const JournalCompactorOptions compaction{
        .min_plain_bytes = static_cast<uint64_t>(journal_compact_mb * 1024 * 1024)};
    std::map<std::string, int64_t> retry_at_ns;
    while (!stop && journal_compact_mb > 0) {
      for (const auto& job : jobs.All()) {
        if (stop) break;
        const int64_t now = shm::MonotonicNowNs();
        if (auto it = retry_at_ns.find(job->name()); it != retry_at_ns.end() && now < it->second) {
          continue;
        }
        absl::StatusOr<JournalCompaction> done = job->CompactJournal(compaction);
        if (!done.ok()) {
          metrics.journal_compactions(false).Increment();
          retry_at_ns[job->name()] = now + 600'000'000'000;
          spdlog::error("job {}: journal not compacted (next try in 10 minutes): {}", job->name(),
                        std::string(done.status().message()));
        } else if (done->records > 0) {
          metrics.journal_compactions(true).Increment();
          metrics.journal_compacted_bytes().Increment(
              static_cast<double>(done->file_bytes_before - done->file_bytes_after));
          spdlog::info("job {}: journal compacted: {}", job->name(), done->Describe());
        }
      }
      for (int i = 0; i < 100 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });

  const int sig = WaitForTerminationSignal();
  spdlog::info("signal {}: shutting down", sig);
  health.SetServing(false);
  query.Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (health_server) health_server->Shutdown();
  stop = true;
  ticker.join();
  compactor.join();
  web.reset();  // after the ticker, which reads its counters; its last requests got UNAVAILABLE
  for (const auto& job : jobs.All()) {
    if (absl::Status s = job->Flush(); !s.ok()) spdlog::error("{}", std::string(s.message()));
  }
  if (absl::Status s = (*ledger)->Flush(); !s.ok()) {
    spdlog::error("node ledger: {}", std::string(s.message()));
  }
  drain_hook.Stop();
  spdlog::info("coordinator stopped");
  return 0;
}
