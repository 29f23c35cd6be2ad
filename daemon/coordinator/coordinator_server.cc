#include "daemon/coordinator/coordinator_server.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/captures/capture_analysis_child.h"
#include "daemon/common/descriptor_limit.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/host_port.h"
#include "grpcpp/support/server_interceptor.h"
#include "shm/monotonic_clock.h"
#include "spdlog/spdlog.h"

namespace stagefrontier {
namespace {

void LogInfo(const std::string& line) { spdlog::info("{}", line); }
void LogWarn(const std::string& line) { spdlog::warn("{}", line); }

absl::Status StartError(const std::string& message) {
  return absl::FailedPreconditionError(message);
}

// Whether nobody listens on `listen` (HOST:PORT): a socket bound there once without
// SO_REUSEPORT, then closed. True for port 0 or a host that does not resolve (gRPC then picks
// a port, or says what is wrong).
bool PortFree(const std::string& listen) {
  const std::optional<HostPort> split = SplitHostPort(listen);
  if (!split) return true;
  const std::string& host = split->host;
  const std::string& port = split->port;
  if (std::atoi(port.c_str()) == 0) return true;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return true;
  bool free = true;
  for (const addrinfo* a = found; a != nullptr && free; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR as gRPC binds: a previous run's connections in TIME_WAIT do not count, a
    // listener does.
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 && errno == EADDRINUSE) free = false;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return free;
}

// Counts the Ingest streams of one shard: one while gRPC holds the call.
class ShardStreamCounter final : public grpc::experimental::Interceptor {
 public:
  explicit ShardStreamCounter(prometheus::Gauge* streams) : streams_(streams) {
    streams_->Increment();
  }
  ~ShardStreamCounter() override { streams_->Decrement(); }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }

 private:
  prometheus::Gauge* streams_;
};

class ShardStreamCounterFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit ShardStreamCounterFactory(prometheus::Gauge* streams) : streams_(streams) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    // Other calls get no interceptor: nothing runs on their messages.
    if (std::strcmp(info->method(), "/stagefrontier.v1.Ingest/Stream") != 0) return nullptr;
    return new ShardStreamCounter(streams_);
  }

 private:
  prometheus::Gauge* streams_;
};

}  // namespace

CoordinatorServer::CoordinatorServer(CoordinatorOptions options)
    : options_(std::move(options)),
      budget_(options_.limits.max_memory_bytes),
      drain_hook_(options_.drain, LogWarn),
      capture_trigger_(options_.capture, LogInfo),
      self_tests_(options_.selftest),
      capture_store_(options_.store),
      // Deadlines and flushes every 10 ms; time from the clock the stubs stamp records with.
      ticker_("ticker", std::chrono::milliseconds(10), shm::MonotonicNowNs),
      compactor_("journal-compactor", std::chrono::milliseconds(10), shm::MonotonicNowNs) {}

CoordinatorServer::~CoordinatorServer() {
  if (started_) Shutdown();
  // Otherwise Start() failed: members go in reverse order, no thread of ours runs.
}

absl::Status CoordinatorServer::Start() {
  // Each step needs the ones before it; the first error ends the start.
  absl::Status s = OpenDataDir();
  if (s.ok()) s = LoadSecurity();
  if (s.ok()) {
    RaiseOpenFileLimit();
    s = OpenNodeLedger();
  }
  if (s.ok()) {
    SetUpCaptureTrigger();
    s = OpenJobs();
  }
  if (s.ok()) s = StartMetricsExposer();
  if (s.ok()) {
    CreateServices();
    s = OpenCaptures();
  }
  if (s.ok()) s = StartGrpcServer();
  if (s.ok()) s = StartHealthServer();
  if (s.ok()) s = StartWebView();
  if (!s.ok()) return s;
  health_.SetServing(true);
  spdlog::info(
      "coordinator listening on {} (port {}, {} gRPC server(s); metrics on {}), data in "
      "{}{}",
      options_.listen, port_, options_.ingest_shards,
      options_.metrics_listen.empty() ? "none" : options_.metrics_listen, options_.data_dir,
      token_.empty() ? "" : ", token required");
  StartPeriodicTasks();
  started_ = true;
  return absl::OkStatus();
}

absl::Status CoordinatorServer::OpenDataDir() {
  const std::string& dir = options_.data_dir;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return StartError(
        absl::StrCat("cannot create data directory ", dir, ": ", std::strerror(errno)));
  }
  // One coordinator per data directory, held until this process ends.
  absl::StatusOr<DataDirLock> lock = DataDirLock::Acquire(dir);
  if (!lock.ok()) return lock.status();
  data_dir_lock_.emplace(*std::move(lock));
  return absl::OkStatus();
}

absl::Status CoordinatorServer::LoadSecurity() {
  absl::StatusOr<std::string> token = ReadTokenFile(options_.token_file);
  if (!token.ok()) return token.status();
  token_ = *token;
  absl::StatusOr<AccessTokens> access = AccessTokens::Load(token_, options_.token_scopes_file);
  if (!access.ok()) return access.status();
  access_.emplace(*std::move(access));
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = ServerCredentials(options_.tls);
  if (!creds.ok()) return creds.status();
  creds_ = *creds;
  return absl::OkStatus();
}

void CoordinatorServer::RaiseOpenFileLimit() {
  // Every sidecar stream is a socket; journals, the ledgers and /metrics need a few more.
  const int max_streams = options_.limits.max_streams;
  const uint64_t wanted = static_cast<uint64_t>(max_streams) + 256;
  absl::StatusOr<uint64_t> fds = RaiseDescriptorLimit(wanted);
  if (!fds.ok()) {
    spdlog::warn("{}", std::string(fds.status().message()));
  } else if (*fds < wanted) {
    spdlog::warn(
        "only {} open files are allowed (hard limit): fewer than the {} sidecar "
        "streams of --max-streams can connect; raise it (LimitNOFILE=, ulimit -Hn)",
        *fds, max_streams);
  }
}

absl::Status CoordinatorServer::OpenNodeLedger() {
  job_options_.data_dir = options_.data_dir;
  job_options_.fsync = !options_.no_fsync;
  job_options_.aligner.deadline_ns = options_.deadline_ms * 1'000'000;
  job_options_.stall.floor_ns = options_.stall_after_ms * 1'000'000;
  job_options_.stall.held_ns = job_options_.aligner.deadline_ns;  // sidecars hold up to 1 s less
  job_options_.stall.pause_alarm_ns = options_.stall_pause_alarm_ms * 1'000'000;
  job_options_.engine = options_.engine;
  job_options_.probe_bracket_rules = options_.probe_bracket;
  job_options_.limits = options_.limits;
  job_options_.budget = &budget_;
  NodeLedgerOptions ledger_options;
  ledger_options.path = options_.data_dir + "/nodes.ledger";
  ledger_options.fsync = job_options_.fsync;
  JournalOpenInfo info;
  absl::StatusOr<std::unique_ptr<NodeLedger>> ledger = NodeLedger::Open(ledger_options, &info);
  if (!ledger.ok()) {
    // Without its ledger the coordinator would forget every node's history: refuse to start.
    return StartError(
        absl::StrCat("node ledger ", ledger_options.path, ": ", ledger.status().message()));
  }
  ledger_ = *std::move(ledger);
  if (info.records > 0 || !info.skipped.empty()) {
    spdlog::info("node ledger {}: {}", ledger_options.path, info.Describe());
  }
  drain_hook_.SetVeto([this](const std::string& node) { return sessions_.InConflict(node); });
  drain_hook_.Start();
  ledger_->SetClassChange([this](const NodeSummary& n, NodeClass before) {
    spdlog::info("node {} is now {} (was {}): {:.1f} GPU-seconds wasted over {} jobs", n.node,
                 NodeClassName(n.cls), NodeClassName(before), n.gpu_seconds, n.jobs_charged);
    drain_hook_.OnClassChange(n);
  });
  return absl::OkStatus();
}

void CoordinatorServer::SetUpCaptureTrigger() {
  // Always told of windows (the pace and the last named rank serve captures asked by hand);
  // decides on its own only with --captures.
  capture_trigger_.set_automatic(options_.captures);
  // Ids go on after those of earlier runs, whose files and reports stay in the store.
  capture_trigger_.SeedNextId(CaptureReports::HighestIdIn(options_.data_dir + "/captures") + 1);
}

absl::Status CoordinatorServer::OpenJobs() {
  // Window observers, in the order they are told of each closed window: the node ledger
  // first (it charges the nodes), then the capture trigger.
  job_options_.observers.push_back(ledger_.get());
  job_options_.observers.push_back(&capture_trigger_);
  JournalOpenInfo fleet_info;
  absl::StatusOr<std::unique_ptr<FleetBaseline>> fleet =
      FleetBaseline::Open(options_.fleet, &fleet_info);
  if (!fleet.ok()) {
    return StartError(
        absl::StrCat("fleet baseline ", options_.fleet.path, ": ", fleet.status().message()));
  }
  fleet_ = *std::move(fleet);
  jobs_ = std::make_unique<JobRegistry>(job_options_, &metrics_, options_.AllowedJobs(), LogInfo);
  if (absl::Status s = jobs_->RestoreAll(); !s.ok()) {
    spdlog::error("some journals could not be restored (the others serve): {}",
                  std::string(s.message()));
  }
  return absl::OkStatus();
}

absl::Status CoordinatorServer::StartMetricsExposer() {
  if (options_.metrics_listen.empty()) return absl::OkStatus();
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(options_.metrics_listen);
  } catch (const std::exception& e) {
    // CivetWeb says only "null context when constructing CivetServer" when the port is taken:
    // say what is likely.
    return StartError(absl::StrCat("cannot serve /metrics on ", options_.metrics_listen,
                                   ": the address is in use or not this machine's (", e.what(),
                                   "); pick another --metrics-listen, or empty to disable it"));
  }
  exposer_->RegisterCollectable(metrics_.registry());
  return absl::OkStatus();
}

void CoordinatorServer::CreateServices() {
  ingest_ = std::make_unique<IngestService>(jobs_.get(), &sessions_, &metrics_, token_,
                                            options_.limits, LogInfo, &self_tests_);
  ingest_->SetNodeLedger(ledger_.get());
  ingest_->SetCaptureAnswerObserver(&capture_trigger_);
  ingest_->SetSidecarTerms({.silent_after_ns = job_options_.stall.silent_ns,
                            .step_deadline_ns = job_options_.aligner.deadline_ns,
                            .stall_after_ns = job_options_.stall.floor_ns,
                            .window_steps = job_options_.engine.window_steps});
  query_ = std::make_unique<QueryService>(jobs_.get(), &sessions_, &metrics_, token_, &self_tests_,
                                          ledger_.get(), fleet_.get());
  query_->SetAccessTokens(*std::move(access_));
  query_->SetCaptureTrigger(&capture_trigger_, options_.captures);
}

// Capture files the sidecars send (with or without --captures: captures asked by hand too),
// and the reports made of them.
absl::Status CoordinatorServer::OpenCaptures() {
  if (absl::Status s = capture_store_.Open(); !s.ok()) return s;
  capture_uploads_ = std::make_unique<CaptureUploadService>(&capture_store_, token_, LogInfo);
  // Reports once every rank of a capture has sent its file (on a thread of their own).
  capture_reports_ = std::make_unique<CaptureReports>(
      &capture_store_, [this](const std::string& job) { return capture_trigger_.Decisions(job); },
      [this](const std::string& job) -> std::optional<StageSchema> {
        std::shared_ptr<JobState> j = jobs_->Find(job);
        if (j == nullptr) return std::nullopt;
        return j->schema();
      },
      LogInfo);
  CaptureReports* reports = capture_reports_.get();
  capture_store_.SetOnComplete([reports](const StoredCapture& f) { reports->OnFileStored(f); });
  // A rank whose profiler failed will send no file: its capture stops waiting for it. Only
  // files of captures this coordinator asked are taken (a trainer's user cannot fill the store
  // with made-up jobs and evict real evidence).
  capture_store_.SetExpected([reports](const std::string& job, const CaptureFileName& name) {
    return reports->Expects(job, name);
  });
  reports->SetAnswersOf([this](const std::string& job, const CaptureDecision& d) {
    return capture_trigger_.Answers(job, d);
  });
  capture_trigger_.SetOnRankFailed([reports](const std::string& job) { reports->Poke(job); });
  // Each capture asked is kept on disk: analysed when its files come, even after a restart.
  capture_trigger_.SetOnAsked(
      [reports](const std::string& job, const CaptureDecision& d) { reports->Remember(job, d); });
  reports->SetAnalyser(ChildCaptureAnalyser(CaptureAnalysisChildOptions{}));
  reports->Start();
  query_->SetCaptureReports(reports, &capture_store_);
  prometheus::Registry& registry = *metrics_.registry();
  capture_metrics_ = std::make_unique<CaptureMetrics>(registry);
  node_metrics_ =
      std::make_unique<NodeMetrics>(registry, static_cast<size_t>(options_.node_metrics_max));
  web_metrics_ = std::make_unique<WebMetrics>(registry);
  return absl::OkStatus();
}

// --ingest-shards gRPC servers on --listen, each with the same service objects (none has
// async methods, the only kind gRPC ties to one server). Each server has one callback
// completion queue, and Debian's gRPC (built without NDEBUG) scans every outstanding call of a
// queue at each completion: with N servers each scan is about 1/N as long.
absl::Status CoordinatorServer::StartGrpcServer() {
  const int shards = options_.ingest_shards;
  const std::string taken =
      absl::StrCat("cannot listen on ", options_.listen,
                   " (another process, perhaps another coordinator, may hold it)");
  if (shards > 1) {
    // The shards need SO_REUSEPORT, with which a second coordinator would bind the same port
    // and take part of the calls: refuse a port someone listens on first. Left open: two
    // coordinators both passing this look before either binds, and a process of the same user
    // asking SO_REUSEPORT (a gRPC server by default) joining once the shards listen.
    if (!PortFree(options_.listen)) return StartError(taken);
    metrics_.AddIngestShards(shards);
  }
  std::string address = options_.listen;
  for (int i = 0; i < shards; ++i) {
    grpc::ServerBuilder builder;
    int bound_port = 0;
    builder.AddListeningPort(address, creds_, &bound_port);
    // gRPC sets SO_REUSEPORT by default: with one server, a second coordinator would bind the
    // same port and take half of the calls. One process per port.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, shards > 1 ? 1 : 0);
    builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, options_.http2_bdp_probe ? 1 : 0);
    // No HTTP/2 keepalive (gRPC's server default pings an idle connection after 2 h, and for
    // that re-arms a timer at every read: 4 points of a core at 12,500 sidecars,
    // docs/results.md). A sidecar sends at least every 4.5 s; a stream silent for
    // --idle-timeout-ms is ended instead (ingest_service.h), a vanished machine's with it.
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, INT_MAX);
    // Nor would keepalive close a connection that holds no call (a vanished sidecar's capture
    // channel, a client that connects and never calls): such a connection gets GOAWAY after the
    // same silence. A timer per call, not per message.
    if (options_.limits.idle_timeout_ms > 0) {
      builder.AddChannelArgument(
          GRPC_ARG_MAX_CONNECTION_IDLE_MS,
          static_cast<int>(std::min<int64_t>(options_.limits.idle_timeout_ms, INT_MAX)));
    }
    builder.RegisterService(ingest_.get());
    builder.RegisterService(query_.get());
    builder.RegisterService(capture_uploads_.get());
    builder.RegisterService(&health_);
    if (shards > 1) {
      std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> counter;
      counter.push_back(
          std::make_unique<ShardStreamCounterFactory>(&metrics_.ingest_shard_streams(i)));
      builder.experimental().SetInterceptorCreators(std::move(counter));
    }
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server || bound_port == 0) return StartError(taken);
    if (i == 0) {
      // Port 0 picked a port: the other shards take the same one.
      port_ = bound_port;
      address = absl::StrCat(options_.listen.substr(0, options_.listen.rfind(':')), ":", port_);
    }
    servers_.push_back(std::move(server));
  }
  return absl::OkStatus();
}

// Plaintext health checking for probes, served apart from the (possibly TLS) main port.
absl::Status CoordinatorServer::StartHealthServer() {
  if (options_.health_listen.empty()) return absl::OkStatus();
  grpc::ServerBuilder hb;
  int health_port = 0;
  hb.AddListeningPort(options_.health_listen, grpc::InsecureServerCredentials(), &health_port);
  hb.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  hb.RegisterService(&health_);
  health_server_ = hb.BuildAndStart();
  if (!health_server_ || health_port == 0) {
    return StartError(absl::StrCat("cannot serve health checking on ", options_.health_listen));
  }
  return absl::OkStatus();
}

// The web view asks the Query service over an in-process channel: the gRPC API's rules.
absl::Status CoordinatorServer::StartWebView() {
  if (options_.http_listen.empty()) return absl::OkStatus();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  web_bridge_ = std::make_unique<QueryBridge>(servers_[0]->InProcessChannel(args));
  WebServerOptions web_options;
  web_options.listen = options_.http_listen;
  web_options.tls_cert = options_.tls.cert;
  web_options.tls_key = options_.tls.key;
  web_options.tls_client_ca = options_.tls.ca;
  absl::StatusOr<std::unique_ptr<WebServer>> started = WebServer::Start(
      web_options, [bridge = web_bridge_.get()](absl::string_view path, absl::string_view url_query,
                                                absl::string_view auth) {
        return bridge->Get(path, url_query, auth);
      });
  if (!started.ok()) return started.status();
  web_ = *std::move(started);
  spdlog::info("web view on {}://{}", web_->tls() ? "https" : "http", options_.http_listen);
  return absl::OkStatus();
}

void CoordinatorServer::StartPeriodicTasks() {
  using std::chrono::nanoseconds;
  using std::chrono::seconds;
  const nanoseconds every_tick(0);
  // Deadlines: close steps whose missing ranks did not report in time; then make what they
  // closed durable.
  ticker_.Add("step-deadlines", every_tick, [this](int64_t now) { CloseDueSteps(now); });
  ticker_.Add("journal-flush", every_tick, [this](int64_t) { FlushJournals(); });
  ticker_.Add("capture-requests", every_tick, [this](int64_t) { FlushCaptureRequests(); });
  ticker_.Add("node-ledger-flush", every_tick, [this](int64_t) { FlushNodeLedger(); });
  ticker_.Add("gauges", seconds(1), [this](int64_t) { UpdateGauges(); });
  // Stalls are decided between windows: within half a second of the limit.
  ticker_.Add("stall-check", std::chrono::milliseconds(500), [this](int64_t now) {
    for (const auto& job : jobs_->All()) job->CheckStall(now);
  });
  ticker_.Add("selftest-expiry", seconds(1), [this](int64_t) { ExpireSelfTests(); });
  ticker_.Add("upload-sweep", seconds(60), [this](int64_t) { SweepAbandonedUploads(); });
  ticker_.Add("memory-gauges", every_tick, [this](int64_t) { UpdateMemoryGauges(); });
  ticker_.Start();
  // Live journal compaction (docs/journal-format.md "Compaction while running"), on its own
  // thread: ingest, flushes and acks go on meanwhile.
  if (options_.journal_compact_mb > 0) {
    compactor_.Add("journal-compaction", seconds(1), [this](int64_t now) { CompactJournals(now); });
  }
  compactor_.Start();
}

void CoordinatorServer::CloseDueSteps(int64_t now_ns) {
  for (const auto& job : jobs_->All()) job->CloseDue(now_ns);
}

void CoordinatorServer::FlushJournals() {
  for (const auto& job : jobs_->All()) {
    if (absl::Status s = job->Flush(); !s.ok()) spdlog::error("{}", std::string(s.message()));
  }
}

void CoordinatorServer::FlushCaptureRequests() {
  // A job that stalled short of a capture's first step closes no window that would end it.
  capture_trigger_.MissStalled(shm::MonotonicNowNs());
  capture_trigger_.Flush(&sessions_);  // automatic ones (--captures) and those asked by hand
}

void CoordinatorServer::FlushNodeLedger() {
  if (absl::Status s = ledger_->Flush(); !s.ok()) {
    spdlog::error("node ledger: {}", std::string(s.message()));
  }
}

void CoordinatorServer::UpdateGauges() {
  node_metrics_->Update(ledger_->Gauges(), &drain_hook_.counters());
  capture_metrics_->Update(capture_trigger_.counters(), capture_store_.counters(),
                           capture_reports_->counters());
  if (web_ != nullptr) web_metrics_->Update(web_->counters());
}

void CoordinatorServer::ExpireSelfTests() {
  query_->ExpireSelfTests();  // self-tests whose client went away stop delaying the job
}

void CoordinatorServer::SweepAbandonedUploads() {
  // Uploads their sidecar gave up.
  if (const int n = capture_store_.RemoveAbandonedUploads(::time(nullptr)); n > 0) {
    spdlog::info("captures: removed {} unfinished upload(s) idle for {} s", n,
                 capture_store_.options().abandoned_upload_s);
  }
}

void CoordinatorServer::UpdateMemoryGauges() {
  metrics_.memory_reserved().Set(static_cast<double>(budget_.used()));
  metrics_.memory_budget().Set(static_cast<double>(budget_.total()));
}

void CoordinatorServer::CompactJournals(int64_t) {
  // A journal that failed waits 10 minutes.
  const JournalCompactorOptions compaction{
      .min_plain_bytes = static_cast<uint64_t>(options_.journal_compact_mb * 1024 * 1024)};
  for (const auto& job : jobs_->All()) {
    if (compactor_.stopping()) break;
    const int64_t now = shm::MonotonicNowNs();
    if (auto it = compaction_retry_at_ns_.find(job->name());
        it != compaction_retry_at_ns_.end() && now < it->second) {
      continue;
    }
    absl::StatusOr<JournalCompaction> done = job->CompactJournal(compaction);
    if (!done.ok()) {
      metrics_.journal_compactions(false).Increment();
      compaction_retry_at_ns_[job->name()] = now + 600'000'000'000;
      spdlog::error("job {}: journal not compacted (next try in 10 minutes): {}", job->name(),
                    std::string(done.status().message()));
    } else if (done->records > 0) {
      metrics_.journal_compactions(true).Increment();
      metrics_.journal_compacted_bytes().Increment(
          static_cast<double>(done->file_bytes_before - done->file_bytes_after));
      spdlog::info("job {}: journal compacted: {}", job->name(), done->Describe());
    }
  }
}

void CoordinatorServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // 1. Stop taking work: probes see NOT_SERVING, watchers and self-test waits end, then the
  //    servers finish their calls (2 s at most) and close.
  health_.SetServing(false);
  query_->Shutdown();
  //    The shards at once, with one deadline: each waits only for its own calls.
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(2);
  std::vector<std::thread> stopping;
  for (size_t i = 1; i < servers_.size(); ++i) {
    stopping.emplace_back([server = servers_[i].get(), deadline] { server->Shutdown(deadline); });
  }
  servers_[0]->Shutdown(deadline);
  for (std::thread& t : stopping) t.join();
  if (health_server_) health_server_->Shutdown();
  // 2. The periodic duties: nothing arrives any more to close or flush on a timer.
  ticker_.Stop();
  compactor_.Stop();
  // 3. The web view, after the ticker, which reads its counters; its last requests got
  //    UNAVAILABLE.
  web_.reset();
  // 4. Make everything durable: the journals, then the node ledger.
  FlushJournals();
  FlushNodeLedger();
  // 5. No more drain commands.
  drain_hook_.Stop();
}

}  // namespace stagefrontier
