// The ingest and query services over real gRPC on loopback, fed bad input: every bad stream
// ends with its own status code, per-rank problems are refused in the acknowledgement, and a
// good stream keeps being served throughout.
#include "daemon/coordinator/ingest_service.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/common/access_tokens.h"
#include "daemon/common/grpc_security.h"
#include "daemon/coordinator/query_service.h"
#include "daemon/events/verdict_observer.h"
#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "tests/daemon/coordinator/ingest_declaration.h"

namespace stagefrontier {
namespace {

constexpr char kToken[] = "s3cret";

struct Server {
  explicit Server(ResourceLimits limits = {}, VerdictObserver* observer = nullptr,
                  int window_steps = 100) {
    char dir[] = "/tmp/sf_ingest_XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    options.data_dir = dir;
    options.fsync = false;
    options.limits = limits;
    if (observer != nullptr) options.observers.push_back(observer);
    options.engine.window_steps = window_steps;
    jobs = std::make_unique<JobRegistry>(options, &metrics, std::set<std::string>{});
    ingest = std::make_unique<IngestService>(jobs.get(), &sessions, &metrics, kToken, limits);
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

v1::SidecarMessage Hello(int version = 1, const std::string& node = "test-node",
                         const std::string& sidecar_id = "test-node/1/00") {
  v1::SidecarMessage m;
  m.mutable_hello()->set_protocol_version(static_cast<v1::ProtocolVersion>(version));
  m.mutable_hello()->set_node(node);
  m.mutable_hello()->set_sidecar_id(sidecar_id);
  return m;
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

// Regression (issue 28, attack 7): a second sidecar calling itself node1 while the real one
// was connected had its job's windows charged to node1.
TEST_CASE("a node name held by a connected sidecar cannot be claimed by another") {
  Server server;
  Stream real(server);
  REQUIRE(real.rw->Write(Hello(1, "node1", "node1/100/aa")));
  v1::StepBatch b;
  b.set_batch_seq(1);
  Declare(&b, 0);
  AddSteps(&b, 0, 0, 3);
  CHECK(SendBatch(real, b).rejections_size() == 0);  // connected, serving
  // The same sidecar's second lane (same id) is welcome.
  Stream lane(server);
  REQUIRE(lane.rw->Write(Hello(1, "node1", "node1/100/aa")));
  v1::StepBatch b2;
  b2.set_batch_seq(1);
  Declare(&b2, 1);
  AddSteps(&b2, 1, 0, 3);
  CHECK(SendBatch(lane, b2).rejections_size() == 0);
  // Another sidecar (another id) claiming node1 is refused and counted; the node is flagged.
  Stream impostor(server);
  impostor.rw->Write(Hello(1, "node1", "node1/666/bb"));
  const grpc::Status st = impostor.End();
  CHECK(st.error_code() == grpc::ALREADY_EXISTS);
  CHECK_THAT(st.error_message(), Catch::Contains("claimed node node1 while sidecar node1/100/aa"));
  CHECK(server.metrics.node_identity_conflicts().Value() == 1);
  CHECK(server.sessions.conflicts() == 1);
  CHECK_THAT(server.sessions.InConflict("node1"), Catch::Contains("node1/666/bb"));
  CHECK(server.sessions.InConflict("node2").empty());
  // Once the real sidecar's streams have ended, a restarted sidecar (new id) is accepted.
  CHECK(real.End().ok());
  CHECK(lane.End().ok());
  for (int i = 0; i < 100 && server.sessions.size() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Stream restarted(server);
  REQUIRE(restarted.rw->Write(Hello(1, "node1", "node1/101/cc")));
  v1::StepBatch b3;
  b3.set_batch_seq(1);
  AddSteps(&b3, 2, 0, 1);
  SendBatch(restarted, b3);  // answered: the stream was accepted
  CHECK(restarted.End().ok());
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
  SECTION("a malformed batch: refused for that rank, the stream goes on") {
    // Regression: ending the stream made the sidecar re-send the same batch forever.
    Stream s(srv);
    s.rw->Write(Hello());
    v1::StepBatch bad;
    Declare(&bad, 1, "m");
    AddSteps(&bad, 1, 10, 12, "m");
    bad.mutable_steps(0)->set_count(5);  // more steps than the bytes hold
    v1::BatchAck a = SendBatch(s, bad);
    REQUIRE(a.rejections_size() == 1);
    CHECK(a.rejections(0).code() == static_cast<int>(absl::StatusCode::kInvalidArgument));
    CHECK_THAT(a.rejections(0).message(), Catch::Contains("truncated"));
    CHECK(a.rejections(0).records() == 5);
    v1::StepBatch fine;
    AddSteps(&fine, 1, 10, 12, "m");
    CHECK(SendBatch(s, fine).accepted() == 3);
    CHECK(s.End().ok());
  }
  SECTION("a step number past 2^40 (a legal int64) is refused for that rank") {
    Stream s(srv);
    s.rw->Write(Hello());
    v1::StepBatch bad;
    Declare(&bad, 1);
    AddSteps(&bad, 1, 20, 20);
    bad.mutable_steps(0)->set_base_step(int64_t{1} << 41);
    v1::BatchAck a = SendBatch(s, bad);
    REQUIRE(a.rejections_size() == 1);
    CHECK_THAT(a.rejections(0).message(), Catch::Contains("outside [0, 2^40)"));
    CHECK(s.End().ok());
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

// Regression (issue 30, item 7): a trainer whose stages differ from the job's had every record
// refused while `sfctl health` showed nothing for its rank.
TEST_CASE("a rank whose declaration is refused shows in health: refused, why, how many") {
  Server srv;
  Stream good(srv);
  REQUIRE(good.rw->Write(Hello()));
  v1::StepBatch b;
  b.set_batch_seq(1);
  Declare(&b, 0);
  AddSteps(&b, 0, 0, 4);
  CHECK(SendBatch(good, b).rejections_size() == 0);
  Stream other(srv);
  REQUIRE(other.rw->Write(Hello()));
  v1::StepBatch wrong;
  wrong.set_batch_seq(1);
  Declare(&wrong, 1, "j", 4, "allreduce");  // another schema than the job's
  AddSteps(&wrong, 1, 0, 4);
  const v1::BatchAck a = SendBatch(other, wrong);
  REQUIRE(a.rejections_size() == 2);
  CHECK(a.rejections(1).records() == 5);
  grpc::ClientContext ctx;
  AttachToken(&ctx, kToken);
  v1::GetHealthRequest req;
  req.set_job("j");
  v1::GetHealthReply health;
  REQUIRE(v1::Query::NewStub(srv.channel)->GetHealth(&ctx, req, &health).ok());
  const v1::RankHealth& r1 = health.ranks(1);
  CHECK(r1.state() == "refused");
  CHECK(r1.rejected() == 5);
  CHECK_THAT(r1.last_error(), Catch::StartsWith("refused: ") && Catch::Contains("schema"));
  CHECK(health.ranks(0).state() == "reporting");
  CHECK(health.ranks(2).state() == "unseen");
  CHECK(good.End().ok());
  CHECK(other.End().ok());
}

// Regression (hostile input): every refused declaration was kept for the stream's life, so a
// trainer declaring ever new ranks or job names grew it without bound.
TEST_CASE("a stream keeps at most 4,096 refusals; later ones are refused without a trace") {
  ResourceLimits limits;
  limits.max_jobs_per_stream = 1;
  Server srv(limits);
  Stream s(srv);
  REQUIRE(s.rw->Write(Hello()));
  int seq = 0;
  int rejected = 0;
  for (int first = 0; first < 4'100; first += 500) {  // the test server takes 64 KB messages
    v1::StepBatch b;
    b.set_batch_seq(++seq);
    if (first == 0) Declare(&b, 0, "one");
    for (int r = first; r < std::min(first + 500, 4'100); ++r) {
      Declare(&b, r % 8, absl::StrCat("other", r).c_str());
    }
    rejected += SendBatch(s, b).rejections_size();
  }
  CHECK(rejected == 4'100);
  v1::StepBatch steps;
  steps.set_batch_seq(++seq);
  AddSteps(&steps, 0, 0, 1, "other0");             // a refusal kept: its reason
  AddSteps(&steps, 4'099 % 8, 0, 1, "other4099");  // past the bound: not kept
  const v1::BatchAck ack = SendBatch(s, steps);
  REQUIRE(ack.rejections_size() == 2);
  CHECK_THAT(ack.rejections(0).message(), Catch::Contains("--max-jobs-per-stream"));
  CHECK_THAT(ack.rejections(1).message(), Catch::Contains("was not declared on this stream"));
  CHECK(s.End().ok());
}

// Regression: a stream counted every job it ever declared against --max-jobs-per-stream, and
// the coordinator every job it ever held against --max-jobs, so that a sidecar serving job
// after job (for days) and a coordinator serving a cluster refused all new jobs once the
// counts were reached. A job idle for --job-retire-idle-ms no longer counts: the stream
// forgets it, the coordinator retires it from memory (its journal stays), a query names where
// it went, and a rank refused for want of room is taken once there is room.
TEST_CASE("jobs idle for --job-retire-idle-ms leave the stream and the coordinator") {
  ResourceLimits limits;
  limits.max_jobs_per_stream = 1;
  limits.max_jobs = 1;
  limits.job_retire_idle_ms = 200;
  Server srv(limits);
  Stream s(srv);
  REQUIRE(s.rw->Write(Hello()));
  v1::StepBatch one;
  one.set_batch_seq(1);
  Declare(&one, 0, "one");
  AddSteps(&one, 0, 0, 3, "one");
  REQUIRE(SendBatch(s, one).rejections_size() == 0);
  v1::StepBatch two;
  two.set_batch_seq(2);
  Declare(&two, 0, "two");
  AddSteps(&two, 0, 0, 3, "two");
  // While "one" is active, "two" is refused as before.
  v1::BatchAck early = SendBatch(s, two);
  REQUIRE(early.rejections_size() == 2);
  CHECK_THAT(early.rejections(0).message(), Catch::Contains("--max-jobs-per-stream"));
  // "one" idle past 200 ms, and the stream's next retry due (at most one batch a second).
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  // A sidecar declares a rank once: its later steps find the room made and are taken.
  v1::StepBatch more;
  more.set_batch_seq(3);
  AddSteps(&more, 0, 4, 7, "two");
  const v1::BatchAck later = SendBatch(s, more);
  CHECK(later.rejections_size() == 0);
  CHECK(later.accepted() == 4);
  CHECK(srv.jobs->Find("one") == nullptr);
  CHECK(srv.jobs->retired_count() == 1);
  grpc::ClientContext ctx;
  AttachToken(&ctx, kToken);
  v1::GetHealthRequest req;
  req.set_job("one");
  v1::GetHealthReply health;
  const grpc::Status st = v1::Query::NewStub(srv.channel)->GetHealth(&ctx, req, &health);
  CHECK(st.error_code() == grpc::NOT_FOUND);
  CHECK_THAT(st.error_message(),
             Catch::Contains("left this coordinator's memory") && Catch::Contains("one.journal"));
  CHECK(s.End().ok());
}

// Issue 28, item 5: tokens need not all be the shared one that may do everything.
TEST_CASE("scoped tokens: read-only, control, one job") {
  Server srv;
  char path[] = "/tmp/sf_scopes_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const std::string scopes =
      "# scope token\nread  reader-0123456789abcdef\ncontrol ctl-0123456789abcdef\n"
      "job:j jobj-0123456789abcdef   # job j only\n";
  REQUIRE(::write(fd, scopes.data(), scopes.size()) == static_cast<ssize_t>(scopes.size()));
  ::close(fd);
  absl::StatusOr<AccessTokens> tokens = AccessTokens::Load(kToken, path);
  REQUIRE(tokens.ok());
  CHECK(tokens->scoped() == 3);
  srv.query->SetAccessTokens(*std::move(tokens));
  Stream s(srv);
  s.rw->Write(Hello());
  v1::StepBatch b;
  b.set_batch_seq(1);
  Declare(&b, 0);
  Declare(&b, 1, "k");
  SendBatch(s, b);
  auto stub = v1::Query::NewStub(srv.channel);
  auto health = [&](const std::string& token, const std::string& job) {
    grpc::ClientContext ctx;
    AttachToken(&ctx, token);
    v1::GetHealthRequest req;
    req.set_job(job);
    v1::GetHealthReply r;
    return stub->GetHealth(&ctx, req, &r);
  };
  auto pause = [&](const std::string& token, const std::string& job) {
    grpc::ClientContext ctx;
    AttachToken(&ctx, token);
    v1::ControlCommand cmd;
    cmd.set_job(job);
    cmd.set_pause(true);
    v1::ControlReply r;
    return stub->Control(&ctx, cmd, &r);
  };
  auto jobs = [&](const std::string& token) {
    grpc::ClientContext ctx;
    AttachToken(&ctx, token);
    v1::ListJobsReply r;
    REQUIRE(stub->ListJobs(&ctx, {}, &r).ok());
    std::vector<std::string> names;
    for (const auto& j : r.jobs()) names.push_back(j.job());
    return names;
  };
  CHECK(health("reader-0123456789abcdef", "k").ok());
  grpc::Status st = pause("reader-0123456789abcdef", "j");
  CHECK(st.error_code() == grpc::PERMISSION_DENIED);
  CHECK_THAT(st.error_message(), Catch::Contains("may read but not control"));
  CHECK(pause("ctl-0123456789abcdef", "k").ok());
  CHECK(pause("jobj-0123456789abcdef", "j").ok());
  st = health("jobj-0123456789abcdef", "k");
  CHECK(st.error_code() == grpc::PERMISSION_DENIED);
  CHECK_THAT(st.error_message(), Catch::Contains("for job j only"));
  CHECK(pause("jobj-0123456789abcdef", "k").error_code() == grpc::PERMISSION_DENIED);
  CHECK(jobs("jobj-0123456789abcdef") == std::vector<std::string>{"j"});
  CHECK(jobs("reader-0123456789abcdef") == std::vector<std::string>{"j", "k"});
  CHECK(jobs(kToken) == std::vector<std::string>{"j", "k"});
  CHECK(health("wrong-0123456789abcdef", "j").error_code() == grpc::UNAUTHENTICATED);
  {
    grpc::ClientContext ctx;
    AttachToken(&ctx, "reader-0123456789abcdef");
    v1::ListNodesReply r;
    // No node ledger here: UNIMPLEMENTED after the token passed; a job's token may not.
    CHECK(stub->ListNodes(&ctx, {}, &r).error_code() == grpc::UNIMPLEMENTED);
  }
  {
    grpc::ClientContext ctx;
    AttachToken(&ctx, "jobj-0123456789abcdef");
    v1::ListNodesReply r;
    CHECK(stub->ListNodes(&ctx, {}, &r).error_code() == grpc::PERMISSION_DENIED);
  }
  CHECK(s.End().ok());
}

TEST_CASE("scoped tokens: a malformed scopes file is refused naming the line") {
  auto load = [](const std::string& shared, const std::string& text) {
    char path[] = "/tmp/sf_scopes_XXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    ::close(fd);
    return AccessTokens::Load(shared, path).status();
  };
  CHECK_THAT(std::string(load(kToken, "read\n").message()), Catch::Contains(":1: want"));
  CHECK_THAT(std::string(load(kToken, "\nadmin abcdefghijklmnopq\n").message()),
             Catch::Contains(":2: unknown scope \"admin\""));
  CHECK_THAT(std::string(load(kToken, "read short\n").message()), Catch::Contains("fewer than 16"));
  CHECK_THAT(
      std::string(load(kToken, "read abcdefghijklmnopq\ncontrol abcdefghijklmnopq\n").message()),
      Catch::Contains(":2: a token used twice"));
  CHECK_THAT(std::string(load("", "read abcdefghijklmnopq\n").message()),
             Catch::Contains("need the shared one"));
  CHECK(absl::IsNotFound(AccessTokens::Load(kToken, "/nonexistent/scopes").status()));
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
  // GetRankSteps: GetSteps' checks, and a rank outside the job.
  const auto rank_steps = [&](const std::string& job, int64_t from, int64_t to, int32_t rank,
                              v1::GetRankStepsReply* r) {
    grpc::ClientContext ctx;
    AttachToken(&ctx, kToken);
    v1::GetRankStepsRequest req;
    req.set_job(job);
    req.set_from_step(from);
    req.set_to_step(to);
    if (rank >= 0) req.add_ranks(rank);
    return stub->GetRankSteps(&ctx, req, r);
  };
  {
    v1::GetRankStepsReply r;
    CHECK(rank_steps("nope", 0, 10, -1, &r).error_code() == grpc::NOT_FOUND);
    CHECK(rank_steps("j", 10, 0, -1, &r).error_code() == grpc::INVALID_ARGUMENT);
    CHECK(rank_steps("j", 0, 10, 4, &r).error_code() == grpc::OUT_OF_RANGE);
    REQUIRE(rank_steps("j", 0, 10, 3, &r).ok());
    CHECK(r.steps().empty());
    CHECK(r.oldest_held_step() == -1);
    CHECK(r.world_size() == 4);
  }
  {
    // held_only: the stream ends after the verdicts held (none here) instead of waiting.
    grpc::ClientContext ctx;
    AttachToken(&ctx, kToken);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::WatchVerdictsRequest req;
    req.set_job("j");
    req.set_held_only(true);
    auto reader = stub->WatchVerdicts(&ctx, req);
    v1::VerdictEvent ev;
    CHECK_FALSE(reader->Read(&ev));
    CHECK(reader->Finish().ok());
  }
  CHECK(good.End().ok());
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

// Drives the ingest method with raw bytes (what a hostile or broken client can send).
struct RawStream {
  RawStream(const std::shared_ptr<grpc::Channel>& channel) : stub(channel) {
    AttachToken(&ctx, kToken);
    call = stub.PrepareCall(&ctx, "/stagefrontier.v1.Ingest/Stream", &cq);
    call->StartCall(Tag(1));
    Wait();
  }
  void* Tag(intptr_t t) { return reinterpret_cast<void*>(t); }
  bool Wait() {
    void* tag = nullptr;
    bool ok = false;
    REQUIRE(cq.Next(&tag, &ok));
    return ok;
  }
  bool WriteBytes(const std::string& bytes) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer buf(&slice, 1);
    call->Write(buf, Tag(2));
    return Wait();
  }
  bool WriteMessage(const google::protobuf::Message& m) {
    return WriteBytes(m.SerializeAsString());
  }
  // Reads one message (Finish waits until what was sent is read).
  bool ReadOne() {
    grpc::ByteBuffer buf;
    call->Read(&buf, Tag(4));
    return Wait();
  }
  grpc::Status Finish() {
    grpc::Status status;
    call->Finish(&status, Tag(3));
    Wait();
    return status;
  }
  ~RawStream() {
    cq.Shutdown();
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
    }
  }
  grpc::GenericStub stub;
  grpc::ClientContext ctx;
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call;
};

double CounterValue(CoordinatorMetrics& m, const std::string& name, const std::string& label) {
  for (const auto& family : m.registry()->Collect()) {
    if (family.name != name) continue;
    for (const auto& metric : family.metric) {
      for (const auto& l : metric.label) {
        if (l.value == label) return metric.counter.value;
      }
    }
  }
  return -1;
}

// Regression (hostile input): garbage bytes ended the stream with OK and no metric.
TEST_CASE("garbage bytes end the stream with INVALID_ARGUMENT, said and counted") {
  Server srv;
  RawStream raw(srv.channel);
  REQUIRE(raw.WriteMessage(Hello()));
  REQUIRE(raw.ReadOne());  // the StreamLimits the Hello earns
  raw.WriteBytes(std::string("\xff\xff\xff\xff\x0f garbage", 12));
  grpc::Status st = raw.Finish();
  CHECK(st.error_code() == grpc::INVALID_ARGUMENT);
  CHECK_THAT(st.error_message(), Catch::Contains("is not a stagefrontier.v1.SidecarMessage"));
  CHECK(CounterValue(srv.metrics, "stagefrontier_ingest_streams_cut_total", "malformed_message") ==
        1);
}

// Regression (hostile input): one stream that never read its acknowledgements blocked the one
// acknowledging thread, and every other sidecar's acks with it.
TEST_CASE("a stream that never reads its acks is cut off; others are acknowledged throughout") {
  ResourceLimits limits;
  limits.max_stream_queue = 8;
  Server srv(limits);
  // The hostile client: a tiny receive window, and it never reads.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto hostile_channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(srv.port),
                                                   grpc::InsecureChannelCredentials(), args);
  RawStream hostile(hostile_channel);
  REQUIRE(hostile.WriteMessage(Hello()));
  v1::SidecarMessage m;
  Declare(m.mutable_batch(), 0, "slow");
  REQUIRE(hostile.WriteMessage(m));
  Stream good(srv);
  REQUIRE(good.rw->Write(Hello()));
  v1::StepBatch b;
  Declare(&b, 0);
  REQUIRE(SendBatch(good, b).rejections_size() == 0);
  int good_acks = 0;
  int sent = 0;
  bool cut = false;
  for (int i = 0; i < 400 && !cut; ++i) {
    v1::SidecarMessage batch;
    batch.mutable_batch()->set_batch_seq(i + 2);
    AddSteps(batch.mutable_batch(), 0, i, i, "slow");
    // Ranks never declared: each is refused in the ack, which makes the acks big enough to
    // fill the unread window fast.
    for (int r = 1; r <= 30; ++r) AddSteps(batch.mutable_batch(), r, i, i, "slow");
    cut = !hostile.WriteMessage(batch);
    // Meanwhile the good stream is acknowledged every time (it used to wait forever behind
    // the one acknowledging thread, blocked on the hostile stream).
    v1::StepBatch g;
    g.set_batch_seq(i + 2);
    AddSteps(&g, 0, i, i);
    ++sent;
    if (SendBatch(good, g).accepted() == 1) ++good_acks;
  }
  CHECK(cut);
  CHECK(good_acks == sent);
  CHECK(CounterValue(srv.metrics, "stagefrontier_ingest_streams_cut_total", "slow_reader") == 1);
  hostile.ctx.TryCancel();  // its status sits behind the data it never read
  hostile.Finish();
  v1::StepBatch g;
  AddSteps(&g, 0, 1000, 1000);
  CHECK(SendBatch(good, g).accepted() == 1);
  CHECK(good.End().ok());
}

TEST_CASE("limits: a stream that never says Hello is ended") {
  ResourceLimits limits;
  limits.hello_timeout_ms = 100;
  Server srv(limits);
  // It would hold a slot forever.
  Stream silent(srv);
  v1::CoordinatorMessage m;
  CHECK_FALSE(silent.rw->Read(&m));
  grpc::Status st = silent.rw->Finish();
  CHECK(st.error_code() == grpc::DEADLINE_EXCEEDED);
  CHECK_THAT(st.error_message(), Catch::Contains("--hello-timeout-ms"));
}

// Apart from the Hello timeout above: with a 100 ms one, a loaded CI machine (ASan, two
// cores) once let the streams below miss it between their creation and their Hello.
TEST_CASE("limits: streams, jobs per stream, world size") {
  ResourceLimits limits;
  limits.max_streams = 2;
  limits.max_jobs_per_stream = 1;
  limits.max_world_size = 64;
  Server srv(limits);
  Stream a(srv);
  REQUIRE(a.rw->Write(Hello()));
  v1::StepBatch b;
  Declare(&b, 0, "one");
  Declare(&b, 0, "two");           // a second job on this stream
  Declare(&b, 1, "one", 1 << 20);  // a huge world (refused as a mismatch: the job exists)
  v1::BatchAck ack = SendBatch(a, b);
  REQUIRE(ack.rejections_size() == 2);
  CHECK(ack.rejections(0).code() == static_cast<int>(absl::StatusCode::kResourceExhausted));
  CHECK_THAT(ack.rejections(0).message(), Catch::Contains("--max-jobs-per-stream"));
  Stream c(srv);
  REQUIRE(c.rw->Write(Hello()));
  v1::StepBatch huge;
  Declare(&huge, 0, "huge", 1 << 20);
  ack = SendBatch(c, huge);
  REQUIRE(ack.rejections_size() == 1);
  CHECK(ack.rejections(0).code() == static_cast<int>(absl::StatusCode::kResourceExhausted));
  CHECK_THAT(ack.rejections(0).message(), Catch::Contains("--max-world-size"));
  // A third stream is refused while two are open.
  Stream third(srv);
  third.rw->Write(Hello());
  grpc::Status st = third.End();
  CHECK(st.error_code() == grpc::RESOURCE_EXHAUSTED);
  CHECK_THAT(st.error_message(), Catch::Contains("--max-streams"));
  CHECK(a.End().ok());
  CHECK(c.End().ok());
}

// The coordinator tells each sidecar, right after its Hello and before any ack, what it holds
// it to (the sidecar keeps its health cadence inside: health_cadence.h CadenceFor); a sidecar
// whose first message is an ack knows the coordinator predates it.
TEST_CASE("after the Hello, before any ack: the stream's limits") {
  ResourceLimits limits;
  limits.idle_timeout_ms = 45'000;
  Server srv(limits);
  srv.ingest->SetSidecarTerms({.silent_after_ns = 4'750'000'000,
                               .step_deadline_ns = 7'000'000'000,
                               .stall_after_ns = 6'000'000'000,
                               .window_steps = 40});
  Stream s(srv);
  REQUIRE(s.rw->Write(Hello()));
  v1::StepBatch b;
  Declare(&b, 0);
  AddSteps(&b, 0, 0, 3);
  v1::SidecarMessage m;
  *m.mutable_batch() = b;
  REQUIRE(s.rw->Write(m));
  v1::CoordinatorMessage first;
  REQUIRE(s.rw->Read(&first));
  REQUIRE(first.has_limits());
  CHECK(first.limits().silent_after_ms() == 4750);
  CHECK(first.limits().idle_timeout_ms() == 45'000);
  // What the sidecar's batching keeps inside (batch_hold.h).
  CHECK(first.limits().step_deadline_ms() == 7000);
  CHECK(first.limits().stall_after_ms() == 6000);
  CHECK(first.limits().window_steps() == 40);
  CHECK(first.limits().batch_health());  // health may ride a batch (StepBatch.health)
  v1::CoordinatorMessage second;
  REQUIRE(s.rw->Read(&second));
  CHECK(second.has_ack());
  // Once per stream: the next message is the next ack.
  v1::StepBatch more;
  AddSteps(&more, 0, 4, 5);
  *m.mutable_batch() = more;
  REQUIRE(s.rw->Write(m));
  v1::CoordinatorMessage third;
  REQUIRE(s.rw->Read(&third));
  REQUIRE(third.has_ack());
  CHECK(third.ack().accepted() == 2);
  CHECK(s.End().ok());
}

// The coordinator has no HTTP/2 keepalive (coordinator_server.cc): a stream that falls silent
// after its Hello (a machine that vanished leaves its connection half-open) is ended by
// --idle-timeout-ms instead, and one that keeps sending is not.
TEST_CASE("limits: a stream silent past --idle-timeout-ms is ended, a talking one is not") {
  ResourceLimits limits;
  limits.idle_timeout_ms = 600;
  Server srv(limits);
  Stream talking(srv);
  REQUIRE(talking.rw->Write(Hello(1, "node-a", "node-a/1/00")));
  // Its own deadline (10 s) only so that the test ends if the coordinator never ends it.
  std::unique_ptr<v1::Ingest::Stub> stub = v1::Ingest::NewStub(srv.channel);
  grpc::ClientContext ctx;
  AttachToken(&ctx, kToken);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto silent = stub->Stream(&ctx);
  REQUIRE(silent->Write(Hello(1, "node-b", "node-b/1/00")));
  // 1.5 s, 2.5 times the limit: the talking stream sends every 100 ms (an empty health).
  v1::SidecarMessage health;
  health.mutable_health();
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500)) {
    REQUIRE(talking.rw->Write(health));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  v1::CoordinatorMessage m;
  REQUIRE(silent->Read(&m));  // the StreamLimits after its Hello, then nothing
  CHECK(m.has_limits());
  CHECK_FALSE(silent->Read(&m));
  const grpc::Status st = silent->Finish();
  CHECK(st.error_code() == grpc::DEADLINE_EXCEEDED);
  CHECK_THAT(st.error_message(), Catch::Contains("nothing received for 600 ms"));
  CHECK_THAT(st.error_message(), Catch::Contains("--idle-timeout-ms"));
  CHECK(CounterValue(srv.metrics, "stagefrontier_ingest_streams_cut_total", "idle") == 1);
  CHECK(talking.End().ok());
}

// Regression (hostile input): a full disk when a job first appeared acknowledged the refusal,
// discarded the steps and left an empty journal that refused the job for good.
TEST_CASE("a job that cannot be journaled yet is not acknowledged, and arrives whole later") {
  Server srv;
  signal(SIGXFSZ, SIG_IGN);
  rlimit old{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  rlimit none = old;
  none.rlim_cur = 0;  // no file may grow: as full as a disk gets
  v1::StepBatch b;
  b.set_batch_seq(1);
  Declare(&b, 0);
  AddSteps(&b, 0, 0, 9);
  {
    Stream s(srv);
    REQUIRE(s.rw->Write(Hello()));
    REQUIRE(setrlimit(RLIMIT_FSIZE, &none) == 0);
    v1::SidecarMessage m;
    *m.mutable_batch() = b;
    s.rw->Write(m);
    v1::CoordinatorMessage reply;
    bool acked = false;
    while (s.rw->Read(&reply)) acked = acked || reply.has_ack();
    grpc::Status st = s.rw->Finish();
    REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
    CHECK_FALSE(acked);
    CHECK(st.error_code() == grpc::UNAVAILABLE);
    CHECK_THAT(st.error_message(), Catch::Contains("cannot persist job j now"));
  }
  CHECK(srv.jobs->Find("j") == nullptr);
  // The sidecar sends the same batch again once the disk has room: nothing was lost.
  Stream s(srv);
  REQUIRE(s.rw->Write(Hello()));
  v1::BatchAck ack = SendBatch(s, b);
  CHECK(ack.rejections_size() == 0);
  CHECK(ack.accepted() == 10);
  CHECK(s.End().ok());
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

// What each closed window said about whether its ranks can take captures.
struct CaptureAbilityObserver : VerdictObserver {
  void OnJobWindow(const ClosedJobWindow& w) override {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(w.rank_can_capture);
  }
  std::mutex mu;
  std::vector<std::vector<int8_t>> seen;
};

// Health of job "early" (not declared yet): rank 0 without a capture handler, rank 1 with one.
v1::Health EarlyHealth() {
  v1::Health health;
  for (int rank = 0; rank < 2; ++rank) {
    v1::SlotHealth* h = health.add_slots();
    h->set_job("early");
    h->set_rank(rank);
    h->set_capture_handler(rank == 1);
  }
  return health;
}

// Declares job "early" in `b` with a first window of steps, sends it, and returns the capture
// ability the window's first verdict saw per rank (-1: unknown).
std::vector<int8_t> DeclareEarly(Stream& s, CaptureAbilityObserver& observer, v1::StepBatch b) {
  for (int rank = 0; rank < 2; ++rank) {
    Declare(&b, rank, "early", /*world=*/2);
    AddSteps(&b, rank, 0, 29, "early");
  }
  const v1::BatchAck ack = SendBatch(s, b);
  CHECK(ack.accepted() == 60);
  CHECK(ack.rejections_size() == 0);
  std::lock_guard<std::mutex> lock(observer.mu);
  REQUIRE_FALSE(observer.seen.empty());
  return observer.seen.front();
}

// Regression (CI, session 10): a sidecar that found a segment late sent the batch declaring its
// ranks with a whole window of steps; the window closed before the health behind it arrived, and
// the first capture decision read "cannot capture" for capable ranks.
// Alone before the batch that declares the job, or riding it (StepBatch.health): the same.
TEST_CASE("health sent before its job is declared counts at the job's first window") {
  const bool riding = GENERATE(false, true);
  CAPTURE(riding);
  CaptureAbilityObserver observer;
  Server server({}, &observer, /*window_steps=*/10);
  Stream s(server);
  REQUIRE(s.rw->Write(Hello()));
  v1::SidecarMessage health;
  *health.mutable_health() = EarlyHealth();
  v1::StepBatch b;
  if (riding) {
    *b.mutable_health() = health.health();
  } else {
    REQUIRE(s.rw->Write(health));
  }
  // Rank 0 said it has no handler, rank 1 that it has one: neither is "unknown" (-1).
  CHECK(DeclareEarly(s, observer, std::move(b)) == std::vector<int8_t>{0, 1});
  s.End();
}

// Hostile input: health for jobs the coordinator does not know is kept until their ranks are
// declared, for at most 4,096 (job, rank) pairs a stream, and only for names of up to 63 bytes;
// a stream that floods it with made-up jobs (alone or riding batches) stays bounded and served.
TEST_CASE("early health: at most 4,096 pairs a stream, short names only, the stream served") {
  const bool riding = GENERATE(false, true);
  const int fillers = GENERATE(4'094, 4'096);  // room left for the job's two ranks, or none
  CAPTURE(riding, fillers);
  CaptureAbilityObserver observer;
  Server server({}, &observer, /*window_steps=*/10);
  Stream s(server);
  REQUIRE(s.rw->Write(Hello()));
  int seq = 0;
  auto send = [&](const v1::Health& h) {
    v1::SidecarMessage m;
    if (!riding) {
      *m.mutable_health() = h;
      REQUIRE(s.rw->Write(m));
      return;
    }
    v1::StepBatch b;
    b.set_batch_seq(++seq);
    *b.mutable_health() = h;
    CHECK(SendBatch(s, b).rejections_size() == 0);
  };
  // Long names are never kept, so they take no room: 500 of them first.
  v1::Health flood;
  for (int i = 0; i < 500; ++i) {
    v1::SlotHealth* h = flood.add_slots();
    h->set_job(std::string(64, 'x') + std::to_string(i));
    h->set_capture_handler(true);
  }
  send(flood);
  for (int first = 0; first < fillers; first += 1'000) {  // the test server takes 64 KB
    flood.Clear();
    for (int i = first; i < std::min(first + 1'000, fillers); ++i) {
      v1::SlotHealth* h = flood.add_slots();
      h->set_job(absl::StrCat("made-up-", i));
      h->set_capture_handler(true);
    }
    send(flood);
  }
  send(EarlyHealth());
  v1::StepBatch b;
  b.set_batch_seq(++seq);
  // With room, the early health counts (0: no handler, 1: one); past the bound it was not kept
  // and the ranks read unknown (-1) until their next report.
  CHECK(DeclareEarly(s, observer, std::move(b)) ==
        (fillers < 4'096 ? std::vector<int8_t>{0, 1} : std::vector<int8_t>{-1, -1}));
  CHECK(s.End().ok());
}

}  // namespace
}  // namespace stagefrontier
