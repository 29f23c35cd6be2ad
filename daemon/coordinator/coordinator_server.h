// The coordinator process, less its command line: owns every service (journals and jobs, the
// node ledger and drain hook, captures, self-tests, the gRPC, health, /metrics and web
// servers) and the periodic duties, and brings them up and down in an explicit order.
//
//   CoordinatorServer server(options);  // from ParseCoordinatorOptions
//   if (absl::Status s = server.Start(); !s.ok()) { log s.message(); return 2; }
//   WaitForTerminationSignal();
//   server.Shutdown();
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_COORDINATOR_SERVER_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_COORDINATOR_SERVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/captures/capture_metrics.h"
#include "daemon/captures/capture_reports.h"
#include "daemon/captures/capture_store.h"
#include "daemon/captures/capture_trigger.h"
#include "daemon/captures/capture_upload_service.h"
#include "daemon/common/access_tokens.h"
#include "daemon/common/periodic_tasks.h"
#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/coordinator/coordinator_options.h"
#include "daemon/coordinator/data_dir_lock.h"
#include "daemon/coordinator/health_service.h"
#include "daemon/coordinator/ingest_service.h"
#include "daemon/coordinator/job_registry.h"
#include "daemon/coordinator/query_service.h"
#include "daemon/coordinator/resource_limits.h"
#include "daemon/coordinator/self_tests.h"
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

namespace stagefrontier {

class CoordinatorServer {
 public:
  explicit CoordinatorServer(CoordinatorOptions options);
  ~CoordinatorServer();  // Shutdown() if Start() succeeded and Shutdown() was not called
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  // Opens the data directory, the ledgers and the journals, then serves. The error's message
  // is the line to log; the process should exit 2.
  absl::Status Start();
  // Stops serving, then the periodic duties, then flushes: see the order in the .cc.
  void Shutdown();

  // The gRPC port bound (--listen's, or the one picked for port 0); after Start().
  int port() const { return port_; }
  CoordinatorMetrics& metrics() { return metrics_; }

 private:
  // Start()'s steps, in order.
  absl::Status OpenDataDir();
  absl::Status LoadSecurity();
  void RaiseOpenFileLimit();
  absl::Status OpenNodeLedger();
  void SetUpCaptureTrigger();
  absl::Status OpenJobs();  // the fleet baseline, then the job journals
  absl::Status StartMetricsExposer();
  void CreateServices();
  absl::Status OpenCaptures();
  absl::Status StartGrpcServer();
  absl::Status StartHealthServer();
  absl::Status StartWebView();
  void StartPeriodicTasks();

  // The ticker's duties (one thread, 10 ms tick), in run order.
  void CloseDueSteps(int64_t now_ns);
  void FlushJournals();
  void FlushCaptureRequests();
  void FlushNodeLedger();
  void UpdateGauges();
  void ExpireSelfTests();
  void SweepAbandonedUploads();
  void UpdateMemoryGauges();
  // The compactor's duty (a thread of its own: compaction takes long).
  void CompactJournals(int64_t now_ns);

  // Declared in construction order: destroyed in reverse, each before what it points to.
  CoordinatorOptions options_;
  std::optional<DataDirLock> data_dir_lock_;  // one coordinator per data directory
  std::string token_;
  std::optional<AccessTokens> access_;
  std::shared_ptr<grpc::ServerCredentials> creds_;
  CoordinatorMetrics metrics_;
  JobOptions job_options_;
  MemoryBudget budget_;
  std::unique_ptr<NodeLedger> ledger_;
  SidecarSessions sessions_;  // the connected sidecars; the drain hook asks it about conflicts
  DrainHook drain_hook_;
  CaptureTrigger capture_trigger_;
  std::unique_ptr<FleetBaseline> fleet_;
  std::unique_ptr<JobRegistry> jobs_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  SelfTestBook self_tests_;
  std::unique_ptr<IngestService> ingest_;
  std::unique_ptr<QueryService> query_;
  CaptureStore capture_store_;
  std::unique_ptr<CaptureUploadService> capture_uploads_;
  std::unique_ptr<CaptureReports> capture_reports_;
  std::unique_ptr<CaptureMetrics> capture_metrics_;
  std::unique_ptr<NodeMetrics> node_metrics_;
  std::unique_ptr<WebMetrics> web_metrics_;
  HealthService health_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;  // --ingest-shards, all on --listen
  int port_ = 0;
  std::unique_ptr<grpc::Server> health_server_;  // plaintext, --health-listen
  std::unique_ptr<QueryBridge> web_bridge_;
  std::unique_ptr<WebServer> web_;
  std::map<std::string, int64_t> compaction_retry_at_ns_;  // by job, after a failure
  PeriodicTasks ticker_;
  PeriodicTasks compactor_;
  bool started_ = false;
  bool shut_down_ = false;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_COORDINATOR_SERVER_H_
