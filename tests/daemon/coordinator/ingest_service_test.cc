// The ingest and query services over real gRPC on loopback, fed bad input: every bad stream
// ends with its own status code, per-rank problems are refused in the acknowledgement, and a
// good stream keeps being served throughout.
#include "daemon/coordinator/ingest_service.h"

#include <catch2/catch.hpp>
#include <cstdlib>

#include "daemon/common/grpc_security.h"
#include "daemon/coordinator/query_service.h"
#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"
#include "grpcpp/grpcpp.h"

namespace stagefrontier {
namespace {

constexpr char kToken[] = "s3cret";

struct Server {
  Server() {
    char dir[] = "/tmp/sf_ingest_XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    options.data_dir = dir;
    options.fsync = false;
    jobs = std::make_unique<JobRegistry>(options, &metrics, std::set<std::string>{});
    ingest = std::make_unique<IngestService>(jobs.get(), &sessions, &metrics, kToken);
    query = std::make_unique<QueryService>(jobs.get(), &sessions, &metrics, kToken);
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.SetMaxReceiveMessageSize(64 << 10);
    b.RegisterService(ingest.get());
    b.RegisterService(query.get());
    server = b.BuildAndStart();
    REQUIRE(port > 0);
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                  grpc::InsecureChannelCredentials());
  }
  ~Server() {
    query->Shutdown();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  JobOptions options;
  CoordinatorMetrics metrics;
  SidecarSessions sessions;
  std::unique_ptr<JobRegistry> jobs;
  std::unique_ptr<IngestService> ingest;
  std::unique_ptr<QueryService> query;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::shared_ptr<grpc::Channel> channel;
};

struct Stream {
  Stream(Server& s, bool token = true) : stub(v1::Ingest::NewStub(s.channel)) {
    if (token) AttachToken(&ctx, kToken);
    rw = stub->Stream(&ctx);
  }
  std::unique_ptr<v1::Ingest::Stub> stub;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SidecarMessage, v1::CoordinatorMessage>> rw;
  grpc::Status End() {
    rw->WritesDone();
    v1::CoordinatorMessage m;
    while (rw->Read(&m)) {
    }
    return rw->Finish();
  }
};

v1::SidecarMessage Hello(int version = 1) {
  v1::SidecarMessage m;
  m.mutable_hello()->set_protocol_version(static_cast<v1::ProtocolVersion>(version));
  m.mutable_hello()->set_node("test-node");
  return m;
}

void Declare(v1::StepBatch* b, int rank, const char* job = "j", int world = 4,
             const char* second_stage = "grad_sync") {
  v1::RankDeclaration* d = b->add_declarations();
  d->set_job(job);
  d->set_rank(rank);
  d->set_world_size(world);
  v1::Stage* s = d->add_stages();
  s->set_name("data");
  s->set_kind(v1::STAGE_KIND_IO);
  s = d->add_stages();
  s->set_name(second_stage);
  s->set_kind(v1::STAGE_KIND_SYNC);
}

void AddSteps(v1::StepBatch* b, int rank, int first, int last, const char* job = "j") {
  wire::PackedStepsEncoder e(2);
  const int64_t d[] = {1'000'000, 2'000'000};
  for (int s = first; s <= last; ++s) e.Add(s, d, 0);
  *b->add_steps() = wire::MakeRankSteps(job, rank, e);
}

v1::BatchAck SendBatch(Stream& s, const v1::StepBatch& batch) {
  v1::SidecarMessage m;
  *m.mutable_batch() = batch;
  REQUIRE(s.rw->Write(m));
  v1::CoordinatorMessage reply;
  while (s.rw->Read(&reply)) {
    if (reply.has_ack()) return reply.ack();
  }
  FAIL("stream ended before the ack");
  return {};
}

TEST_CASE("bad streams end with specific codes; the good stream goes on") {
  Server srv;
  Stream good(srv);
  REQUIRE(good.rw->Write(Hello()));
  v1::StepBatch b;
  b.set_batch_seq(1);
  for (int r = 0; r < 4; ++r) Declare(&b, r);
  for (int r = 0; r < 4; ++r) AddSteps(&b, r, 0, 9);
  v1::BatchAck ack = SendBatch(good, b);
  CHECK(ack.accepted() == 40);
  CHECK(ack.rejections_size() == 0);

  SECTION("no token") {
    Stream s(srv, /*token=*/false);
    s.rw->Write(Hello());
    grpc::Status st = s.End();
    CHECK(st.error_code() == grpc::UNAUTHENTICATED);
  }
  SECTION("no Hello first") {
    Stream s(srv);
    v1::SidecarMessage m;
    m.mutable_batch()->set_batch_seq(1);
    s.rw->Write(m);
    grpc::Status st = s.End();
    CHECK(st.error_code() == grpc::FAILED_PRECONDITION);
    CHECK_THAT(st.error_message(), Catch::Contains("must be Hello"));
  }
  SECTION("a protocol version it does not know") {
    Stream s(srv);
    s.rw->Write(Hello(7));
    grpc::Status st = s.End();
    CHECK(st.error_code() == grpc::FAILED_PRECONDITION);
    CHECK_THAT(st.error_message(), Catch::Contains("protocol version 7"));
  }
  SECTION("an oversized message") {
    Stream s(srv);
    s.rw->Write(Hello());
    v1::SidecarMessage m;
    v1::RankSteps* rs = m.mutable_batch()->add_steps();
    rs->set_packed(std::string(100 << 10, 'x'));
    s.rw->Write(m);
    grpc::Status st = s.End();
    CHECK(st.error_code() == grpc::RESOURCE_EXHAUSTED);
  }
  SECTION("a malformed batch") {
    Stream s(srv);
    s.rw->Write(Hello());
    v1::StepBatch bad;
    Declare(&bad, 1);
    AddSteps(&bad, 1, 10, 12);
    bad.mutable_steps(0)->set_count(5);  // more steps than the bytes hold
    v1::SidecarMessage m;
    *m.mutable_batch() = bad;
    s.rw->Write(m);
    grpc::Status st = s.End();
    CHECK(st.error_code() == grpc::INVALID_ARGUMENT);
    CHECK_THAT(st.error_message(), Catch::Contains("truncated"));
  }
  SECTION("per-rank refusals come back in the ack") {
    Stream s(srv);
    s.rw->Write(Hello());
    v1::StepBatch mixed;
    mixed.set_batch_seq(1);
    Declare(&mixed, 9);                   // out of range
    Declare(&mixed, 2, "j", 4, "sync2");  // another schema
    AddSteps(&mixed, 3, 10, 12);          // never declared on this stream
    AddSteps(&mixed, 2, 10, 12);          // its declaration was refused
    v1::BatchAck a = SendBatch(s, mixed);
    REQUIRE(a.rejections_size() == 4);
    CHECK(a.rejections(0).code() == static_cast<int>(absl::StatusCode::kOutOfRange));
    CHECK(a.rejections(1).code() == static_cast<int>(absl::StatusCode::kFailedPrecondition));
    CHECK_THAT(a.rejections(1).message(), Catch::Contains("declares schema"));
    CHECK(a.rejections(2).code() == static_cast<int>(absl::StatusCode::kFailedPrecondition));
    CHECK_THAT(a.rejections(2).message(), Catch::Contains("not declared on this stream"));
    CHECK(a.rejections(3).records() == 3);
    CHECK(a.accepted() == 0);
    CHECK(s.End().ok());
  }
  // Whatever happened on the other stream, the good one is still served, and re-sent steps
  // are recognized.
  v1::StepBatch more;
  more.set_batch_seq(2);
  for (int r = 0; r < 4; ++r) AddSteps(&more, r, 5, 14);
  ack = SendBatch(good, more);
  CHECK(ack.accepted() == 20);
  CHECK(ack.duplicates() == 20);
  CHECK(good.End().ok());
}

TEST_CASE("queries: token, unknown job, bad arguments") {
  Server srv;
  auto stub = v1::Query::NewStub(srv.channel);
  {
    grpc::ClientContext ctx;
    v1::ListJobsReply r;
    CHECK(stub->ListJobs(&ctx, {}, &r).error_code() == grpc::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    AttachToken(&ctx, kToken);
    v1::GetSuspectsRequest req;
    req.set_job("nope");
    v1::SuspectsReply r;
    grpc::Status s = stub->GetSuspects(&ctx, req, &r);
    CHECK(s.error_code() == grpc::NOT_FOUND);
    CHECK_THAT(s.error_message(), Catch::Contains("unknown job \"nope\""));
  }
  Stream good(srv);
  good.rw->Write(Hello());
  v1::StepBatch b;
  Declare(&b, 0);
  SendBatch(good, b);
  {
    grpc::ClientContext ctx;
    AttachToken(&ctx, kToken);
    v1::GetSuspectsRequest req;
    req.set_job("j");
    v1::SuspectsReply r;
    CHECK(stub->GetSuspects(&ctx, req, &r).error_code() == grpc::FAILED_PRECONDITION);
  }
  {
    grpc::ClientContext ctx;
    AttachToken(&ctx, kToken);
    v1::ControlCommand cmd;
    cmd.set_job("j");
    cmd.mutable_config()->set_clear_share(3.0);
    v1::ControlReply r;
    CHECK(stub->Control(&ctx, cmd, &r).error_code() == grpc::INVALID_ARGUMENT);
  }
  CHECK(good.End().ok());
}

}  // namespace
}  // namespace stagefrontier
