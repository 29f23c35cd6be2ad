#include "daemon/coordinator/health_service.h"

#include <chrono>
#include <thread>

namespace stagefrontier {
namespace {

using grpc::health::v1::HealthCheckResponse;

bool Known(const std::string& service) {
  return service.empty() || service == "stagefrontier.v1.Ingest" ||
         service == "stagefrontier.v1.Query";
}

}  // namespace

grpc::Status HealthService::Check(grpc::ServerContext*,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  if (!Known(request->service())) {
    return grpc::Status(grpc::NOT_FOUND, "unknown service \"" + request->service() + "\"");
  }
  response->set_status(serving_ ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(grpc::ServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::ServerWriter<HealthCheckResponse>* writer) {
  HealthCheckResponse r;
  int last = -1;
  while (!context->IsCancelled()) {
    const int now = !Known(request->service()) ? HealthCheckResponse::SERVICE_UNKNOWN
                    : serving_                 ? HealthCheckResponse::SERVING
                                               : HealthCheckResponse::NOT_SERVING;
    if (now != last) {
      r.set_status(static_cast<HealthCheckResponse::ServingStatus>(now));
      if (!writer->Write(r)) break;
      last = now;
    }
    if (!serving_ && last == HealthCheckResponse::NOT_SERVING) break;  // shutting down
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return grpc::Status::OK;
}

}  // namespace stagefrontier
