// The coordinator's gRPC health checking service (grpc.health.v1, the convention Kubernetes
// `grpc` probes and grpc_health_probe speak). SERVING once the journals are restored and the
// server listens, NOT_SERVING while it shuts down. Known service names: "" (the whole
// coordinator), "stagefrontier.v1.Ingest", "stagefrontier.v1.Query"; others are NOT_FOUND.
//
//   HealthService health;
//   builder.RegisterService(&health);
//   health.SetServing(true);
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_HEALTH_SERVICE_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_HEALTH_SERVICE_H_

#include <atomic>

#include "grpc/health/v1/health.grpc.pb.h"

namespace stagefrontier {

class HealthService final : public grpc::health::v1::Health::Service {
 public:
  void SetServing(bool serving) { serving_ = serving; }

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  // Sends the status now and whenever it changes, until the call is cancelled.
  grpc::Status Watch(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

 private:
  std::atomic<bool> serving_{false};
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_HEALTH_SERVICE_H_
