// gRPC health checking as Kubernetes probes use it: the same service on the main (TLS-able)
// server and on a plaintext probe server, NOT_SERVING while shutting down, NOT_FOUND for
// services the coordinator does not have, and Watch following changes.
#include "daemon/coordinator/health_service.h"

#include <catch2/catch.hpp>

#include "grpcpp/grpcpp.h"

namespace stagefrontier {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

std::unique_ptr<grpc::Server> Serve(HealthService* health, int* port) {
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  b.RegisterService(health);
  return b.BuildAndStart();
}

TEST_CASE("health checking on two servers, through shutdown") {
  HealthService health;
  int p1 = 0, p2 = 0;
  auto main_server = Serve(&health, &p1);
  auto probe_server = Serve(&health, &p2);
  REQUIRE(p1 > 0);
  REQUIRE(p2 > 0);
  const auto check = [](int port, const std::string& service, HealthCheckResponse* r) {
    auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    HealthCheckRequest req;
    req.set_service(service);
    return stub->Check(&ctx, req, r);
  };
  HealthCheckResponse r;
  REQUIRE(check(p2, "", &r).ok());
  CHECK(r.status() == HealthCheckResponse::NOT_SERVING);  // not yet ready
  health.SetServing(true);
  for (int port : {p1, p2}) {
    REQUIRE(check(port, "", &r).ok());
    CHECK(r.status() == HealthCheckResponse::SERVING);
    REQUIRE(check(port, "stagefrontier.v1.Query", &r).ok());
    CHECK(r.status() == HealthCheckResponse::SERVING);
    CHECK(check(port, "nope", &r).error_code() == grpc::NOT_FOUND);
  }
  // Watch sees SERVING, then NOT_SERVING when shutdown begins.
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(p2), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto reader = stub->Watch(&ctx, HealthCheckRequest());
  REQUIRE(reader->Read(&r));
  CHECK(r.status() == HealthCheckResponse::SERVING);
  health.SetServing(false);
  REQUIRE(reader->Read(&r));
  CHECK(r.status() == HealthCheckResponse::NOT_SERVING);
  CHECK(reader->Finish().ok());
  probe_server->Shutdown();
  main_server->Shutdown();
}

}  // namespace
}  // namespace stagefrontier
