// The coordinator's query API (proto/stagefrontier/v1/query.proto): job list, suspects,
// per-step accounting, each rank's recorded stage durations, a live verdict stream, per-rank
// health, runtime control, self-tests the node ledger and node sweeps.
//
//   QueryService query(&jobs, &sessions, token);
//   builder.RegisterService(&query);
//   ...
//   query.Shutdown();   // ends WatchVerdicts streams before the server stops
//   server->Shutdown();  // then destroy the server before `query`
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_QUERY_SERVICE_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_QUERY_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "daemon/captures/capture_reports.h"
#include "daemon/captures/capture_store.h"
#include "daemon/captures/capture_trigger.h"
#include "daemon/common/access_tokens.h"
#include "daemon/coordinator/job_registry.h"
#include "daemon/coordinator/self_tests.h"
#include "daemon/coordinator/sidecar_sessions.h"
#include "daemon/coordinator/verdict_watchers.h"
#include "daemon/nodes/node_ledger.h"
#include "daemon/sweep/fleet_baseline.h"
#include "stagefrontier/v1/query.grpc.pb.h"

namespace stagefrontier {

// The streaming calls run on gRPC's callback API (verdict_watchers.h, capture_file_stream.h):
// an open WatchVerdicts or FetchCapture stream holds no thread.
class QueryService final : public v1::Query::WithCallbackMethod_WatchVerdicts<
                               v1::Query::WithCallbackMethod_FetchCapture<v1::Query::Service>> {
 public:
  // `self_tests` may be null: Control(selftest) and GetSelfTests then answer UNIMPLEMENTED;
  // `nodes` may be null: ListNodes then answers UNIMPLEMENTED; so does ReportSweep without
  // `fleet`.
  QueryService(JobRegistry* jobs, SidecarSessions* sessions, CoordinatorMetrics* metrics,
               std::string token, SelfTestBook* self_tests = nullptr,
               const NodeLedger* nodes = nullptr, FleetBaseline* fleet = nullptr);

  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsReply* reply) override;
  grpc::Status GetSuspects(grpc::ServerContext* context, const v1::GetSuspectsRequest* request,
                           v1::SuspectsReply* reply) override;
  grpc::Status GetSteps(grpc::ServerContext* context, const v1::GetStepsRequest* request,
                        v1::GetStepsReply* reply) override;
  grpc::Status GetRankSteps(grpc::ServerContext* context, const v1::GetRankStepsRequest* request,
                            v1::GetRankStepsReply* reply) override;
  grpc::ServerWriteReactor<v1::VerdictEvent>* WatchVerdicts(
      grpc::CallbackServerContext* context, const v1::WatchVerdictsRequest* request) override;
  grpc::Status GetHealth(grpc::ServerContext* context, const v1::GetHealthRequest* request,
                         v1::GetHealthReply* reply) override;
  grpc::Status Control(grpc::ServerContext* context, const v1::ControlCommand* request,
                       v1::ControlReply* reply) override;
  grpc::Status GetSelfTests(grpc::ServerContext* context, const v1::GetSelfTestsRequest* request,
                            v1::GetSelfTestsReply* reply) override;
  grpc::Status ListNodes(grpc::ServerContext* context, const v1::ListNodesRequest* request,
                         v1::ListNodesReply* reply) override;
  grpc::Status ReportSweep(grpc::ServerContext* context, const v1::SweepReport* request,
                           v1::SweepJudgement* reply) override;
  grpc::Status ListCaptures(grpc::ServerContext* context, const v1::ListCapturesRequest* request,
                            v1::ListCapturesReply* reply) override;
  grpc::Status GetCaptureReport(grpc::ServerContext* context,
                                const v1::GetCaptureReportRequest* request,
                                v1::GetCaptureReportReply* reply) override;
  grpc::ServerWriteReactor<v1::CaptureFileChunk>* FetchCapture(
      grpc::CallbackServerContext* context, const v1::FetchCaptureRequest* request) override;

  // Where Control(capture) and ListCaptures go; `automatic`: the coordinator runs with
  // --captures. Without one they answer UNIMPLEMENTED.
  void SetCaptureTrigger(CaptureTrigger* trigger, bool automatic) {
    captures_ = trigger;
    captures_automatic_ = automatic;
  }

  // Where GetCaptureReport and FetchCapture look; without them they answer UNIMPLEMENTED.
  void SetCaptureReports(const CaptureReports* reports, const CaptureStore* store) {
    capture_reports_ = reports;
    capture_store_ = store;
  }

  // Ends every WatchVerdicts stream with OK and refuses new ones (UNAVAILABLE); call before
  // the server shuts down.
  void Shutdown();

  // Cancels the running self-tests whose lease ran out (SelfTestLimits::lease_ns) and tells
  // their ranks' stubs to stop. The coordinator calls it every second.
  void ExpireSelfTests();
  // Narrower tokens beside the shared one (access_tokens.h). Set before serving.
  void SetAccessTokens(AccessTokens tokens) { tokens_ = std::move(tokens); }

  // Live WatchVerdicts streams (held_only ones not counted).
  size_t live_watches() const { return watchers_.live(); }

 private:
  // Control's actions, one each.
  grpc::Status SetRecording(JobState* job, bool pause, uint64_t id, v1::ControlReply* reply);
  grpc::Status SetSampling(JobState* job, uint32_t every, uint64_t id, v1::ControlReply* reply);
  grpc::Status ChangeConfig(JobState* job, const v1::ConfigChange& change, v1::ControlReply* reply);
  grpc::Status AskTrace(const JobState& job, const v1::TraceRequest& trace, uint64_t id,
                        v1::ControlReply* reply);
  grpc::Status AskCapture(const JobState& job, const v1::CaptureCommand& capture,
                          v1::ControlReply* reply);
  grpc::Status StartSelfTest(const JobState& job, const v1::SelfTestCommand& command, uint64_t id,
                             v1::ControlReply* reply);
  // OK when the call's token may do `need` on `job` ("": on no one job); UNAUTHENTICATED
  // (counted) or PERMISSION_DENIED otherwise (AccessTokens::Check).
  grpc::Status Authorize(const grpc::ServerContextBase& context, Access need = Access::kRead,
                         const std::string& job = "");
  // Authorizes `need` on the job and finds it: as Authorize, then NOT_FOUND.
  grpc::Status Lookup(const grpc::ServerContextBase& context, const std::string& job,
                      std::shared_ptr<JobState>* out, Access need = Access::kRead);

  JobRegistry* jobs_;
  SidecarSessions* sessions_;
  CoordinatorMetrics* metrics_;
  AccessTokens tokens_;
  SelfTestBook* self_tests_;
  const NodeLedger* nodes_;
  FleetBaseline* fleet_;
  CaptureTrigger* captures_ = nullptr;
  bool captures_automatic_ = false;
  const CaptureReports* capture_reports_ = nullptr;
  const CaptureStore* capture_store_ = nullptr;
  VerdictWatchers watchers_;
  std::atomic<uint64_t> next_request_id_{1};
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_QUERY_SERVICE_H_
