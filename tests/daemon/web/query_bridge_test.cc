// The web view's JSON API against a Query service of its own over a real in-process gRPC
// channel: the token passed on, parameters checked, gRPC errors mapped to HTTP with JSON.
#include "daemon/web/query_bridge.h"

#include <catch2/catch.hpp>
#include <string>

#include "daemon/common/grpc_security.h"
#include "grpcpp/grpcpp.h"

namespace stagefrontier {
namespace {

constexpr char kToken[] = "s3cret";

class FakeQuery final : public v1::Query::Service {
 public:
  grpc::Status ListJobs(grpc::ServerContext* ctx, const v1::ListJobsRequest*,
                        v1::ListJobsReply* reply) override {
    if (!TokenMatches(*ctx, kToken)) {
      return grpc::Status(grpc::UNAUTHENTICATED, "missing or wrong token");
    }
    reply->add_jobs()->set_job("j1");
    return grpc::Status::OK;
  }
  grpc::Status GetSteps(grpc::ServerContext*, const v1::GetStepsRequest* req,
                        v1::GetStepsReply* reply) override {
    if (req->job() != "j1")
      return grpc::Status(grpc::NOT_FOUND, "unknown job \"" + req->job() + "\"");
    reply->add_steps()->set_step(req->from_step());
    reply->add_steps()->set_step(req->to_step());
    return grpc::Status::OK;
  }
  grpc::Status WatchVerdicts(grpc::ServerContext*, const v1::WatchVerdictsRequest* req,
                             grpc::ServerWriter<v1::VerdictEvent>* writer) override {
    if (!req->held_only()) return grpc::Status(grpc::INVALID_ARGUMENT, "want held_only");
    for (int64_t seq = req->after_seq() + 1; seq <= 3; ++seq) {
      v1::VerdictEvent e;
      e.set_seq(seq);
      e.mutable_verdict()->set_label("CLEAR");
      writer->Write(e);
    }
    return grpc::Status::OK;
  }
};

struct Fixture {
  Fixture() {
    grpc::ServerBuilder b;
    b.RegisterService(&service);
    server = b.BuildAndStart();
    bridge = std::make_unique<QueryBridge>(server->InProcessChannel(grpc::ChannelArguments()));
  }
  ~Fixture() { server->Shutdown(); }
  // GET TARGET ("/api/x?query") with an Authorization header if `auth` is not empty.
  HttpReply Get(const std::string& target, const std::string& auth = "") const {
    const size_t q = target.find('?');
    return bridge->Get(target.substr(0, q), q == std::string::npos ? "" : target.substr(q + 1),
                       auth);
  }
  FakeQuery service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<QueryBridge> bridge;
};

TEST_CASE("the API passes the token on and maps errors to HTTP with JSON bodies") {
  Fixture f;
  HttpReply no_token = f.Get("/api/jobs");
  CHECK(no_token.status == 401);
  CHECK(no_token.body == R"({"code":"UNAUTHENTICATED","error":"missing or wrong token"})");
  CHECK(f.Get("/api/jobs", "Bearer wrong").status == 401);
  HttpReply ok = f.Get("/api/jobs", "Bearer s3cret");
  CHECK(ok.status == 200);
  CHECK_THAT(ok.body, Catch::Contains(R"("job":"j1")"));

  HttpReply steps = f.Get("/api/steps?job=j1&from=5&to=9");
  CHECK(steps.status == 200);
  CHECK_THAT(steps.body, Catch::Contains(R"("step":"5")"));
  CHECK_THAT(steps.body, Catch::Contains(R"("step":"9")"));
  HttpReply unknown = f.Get("/api/steps?job=zz");
  CHECK(unknown.status == 404);
  CHECK(unknown.body == R"({"code":"NOT_FOUND","error":"unknown job \"zz\""})");
  HttpReply bad_int = f.Get("/api/steps?job=j1&from=x");
  CHECK(bad_int.status == 400);
  CHECK_THAT(bad_int.body, Catch::Contains("parameter from is not an integer"));
  CHECK(f.Get("/api/steps?from=1").status == 400);  // no job
  HttpReply bad_escape = f.Get("/api/steps?job=%zz");
  CHECK(bad_escape.status == 400);
  CHECK_THAT(bad_escape.body, Catch::Contains("bad %-escape"));
  HttpReply no_path = f.Get("/api/nothing?job=j1");
  CHECK(no_path.status == 404);
  CHECK_THAT(no_path.body, Catch::Contains("no such API path: /api/nothing"));
  // A method the fake service does not implement: UNIMPLEMENTED -> 501.
  CHECK(f.Get("/api/health?job=j1").status == 501);

  HttpReply verdicts = f.Get("/api/verdicts?job=j1&after=1");
  CHECK(verdicts.status == 200);
  CHECK_THAT(verdicts.body, Catch::StartsWith(R"({"verdicts":[{"seq":"2")"));
  CHECK_THAT(verdicts.body, Catch::Contains(R"("seq":"3")"));
}

}  // namespace
}  // namespace stagefrontier
