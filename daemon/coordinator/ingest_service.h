// The coordinator's side of the ingest contract (proto/stagefrontier/v1/ingest.proto): one
// stream per sidecar; declarations register ranks (and create jobs), batches are decoded,
// journaled, aligned and acknowledged once durable (group commit:
// durable_acker.h); control requests go back down the same
// stream. Bad input ends only the stream that sent it, with a specific status, or is refused
// per rank in the acknowledgement; every other stream goes on.
//
//   IngestService ingest(&jobs, &sessions, &metrics, token);
//   builder.RegisterService(&ingest);
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_INGEST_SERVICE_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_INGEST_SERVICE_H_

#include <functional>
#include <string>

#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/coordinator/durable_acker.h"
#include "daemon/coordinator/job_registry.h"
#include "daemon/coordinator/sidecar_sessions.h"
#include "stagefrontier/v1/ingest.grpc.pb.h"

namespace stagefrontier {

class IngestService final : public v1::Ingest::Service {
 public:
  using Log = std::function<void(const std::string&)>;
  IngestService(JobRegistry* jobs, SidecarSessions* sessions, CoordinatorMetrics* metrics,
                std::string token, Log log = nullptr);

  grpc::Status Stream(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::SidecarMessage>* stream) override;

 private:
  grpc::Status Fail(grpc::StatusCode code, const std::string& node, const std::string& message);

  JobRegistry* jobs_;
  SidecarSessions* sessions_;
  CoordinatorMetrics* metrics_;
  std::string token_;
  Log log_;
  DurableAcker acker_;  // last: its thread stops first
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_INGEST_SERVICE_H_
