// The coordinator's side of the ingest contract (proto/stagefrontier/v1/ingest.proto): one
// stream per sidecar, served with gRPC's callback API by IngestStream (ingest_stream.h), so the
// number of threads does not grow with the number of sidecars. Streams beyond --max-streams
// are refused, streams that do not say Hello in time or then fall silent (--idle-timeout-ms)
// are ended, and acknowledgements are sent once durable by one DurableAcker that never blocks on
// a stream.
//
//   IngestService ingest(&jobs, &sessions, &metrics, token, limits, log);
//   builder.RegisterService(&ingest);
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_INGEST_SERVICE_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_INGEST_SERVICE_H_

#include <functional>
#include <map>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/coordinator/durable_acker.h"
#include "daemon/coordinator/ingest_stream.h"
#include "daemon/coordinator/job_registry.h"
#include "daemon/coordinator/resource_limits.h"
#include "daemon/coordinator/sidecar_sessions.h"
#include "stagefrontier/v1/ingest.grpc.pb.h"

namespace stagefrontier {

class IngestService final : public v1::Ingest::WithRawCallbackMethod_Stream<v1::Ingest::Service> {
 public:
  using Log = std::function<void(const std::string&)>;
  IngestService(JobRegistry* jobs, SidecarSessions* sessions, CoordinatorMetrics* metrics,
                std::string token, ResourceLimits limits = {}, Log log = nullptr,
                SelfTestBook* self_tests = nullptr);
  // Notes the machine under each sidecar's node name in `nodes` (node_ledger.h). Call before
  // the server starts.
  void SetNodeLedger(NodeLedger* nodes) { deps_.nodes = nodes; }
  // Passes the stubs' capture answers to `observer` (the capture trigger). Call before the
  // server starts.
  void SetCaptureAnswerObserver(CaptureAnswerObserver* observer) {
    deps_.capture_answers = observer;
  }
  // What every sidecar is told after its Hello (StreamLimits): the stall watch's silence limit
  // (health goes before it), the step deadline, stall floor and window (its batching stays
  // inside them). Call before the server starts.
  void SetSidecarTerms(const SidecarTerms& terms) { deps_.terms = terms; }
  // Stops the watchdog (Hellos, idle streams). Destroy after the server has shut down.
  ~IngestService() override;

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Stream(
      grpc::CallbackServerContext* context) override;

  // Streams open now (with or without their Hello).
  size_t live_streams() const;

 private:
  // Every 200 ms ends the streams past their Hello deadline; every tenth of --idle-timeout-ms
  // (at most every 5 s), the streams silent past it.
  void WatchStreams();

  IngestDeps deps_;
  DurableAcker acker_;
  mutable Mutex mu_;
  CondVar stopped_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, IngestStream*> live_ ABSL_GUARDED_BY(mu_);
  // The live streams whose Hello the watchdog has not seen yet.
  std::map<uint64_t, IngestStream*> awaiting_hello_ ABSL_GUARDED_BY(mu_);
  int64_t idle_checked_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread watchdog_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_INGEST_SERVICE_H_
