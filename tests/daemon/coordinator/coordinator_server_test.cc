// The whole coordinator in-process over real gRPC on loopback: its --ingest-shards servers
// share one port (SO_REUSEPORT), clients on connections of their own stream Ingest and query
// through whichever server the kernel gave them, and a port another process listens on is
// refused as with one server.
#include "daemon/coordinator/coordinator_server.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"
#include "grpcpp/grpcpp.h"
#include "stagefrontier/v1/ingest.grpc.pb.h"
#include "stagefrontier/v1/query.grpc.pb.h"
#include "tests/daemon/coordinator/ingest_declaration.h"

namespace stagefrontier {
namespace {

// The command line's defaults, on a fresh data directory, without /metrics.
CoordinatorOptions Options(int shards, const std::string& listen = "127.0.0.1:0") {
  char dir[] = "/tmp/sf_coordinator_server_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::vector<std::string> args = {
      "stagefrontier-coordinator", "--data-dir",          dir, "--listen", listen, "--no-fsync",
      "--ingest-shards",           std::to_string(shards)};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  CoordinatorOptions o;
  REQUIRE_FALSE(ParseCoordinatorOptions(static_cast<int>(argv.size()), argv.data(), &o));
  o.metrics_listen.clear();
  return o;
}

// A channel with a connection of its own: its own subchannel pool, and arguments no other
// channel has.
std::shared_ptr<grpc::Channel> OwnChannel(int port, int i) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("stagefrontier.test_channel", i);
  return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials(), args);
}

// One sidecar: its node's stream, declaring rank `rank` of job j (world `world`) and its
// steps 0..steps-1 in one batch.
struct Sidecar {
  Sidecar(std::shared_ptr<grpc::Channel> c, int rank, int world, int steps)
      : channel(std::move(c)), stub(v1::Ingest::NewStub(channel)) {
    rw = stub->Stream(&ctx);
    v1::SidecarMessage hello;
    hello.mutable_hello()->set_protocol_version(static_cast<v1::ProtocolVersion>(1));
    hello.mutable_hello()->set_node("node" + std::to_string(rank));
    hello.mutable_hello()->set_sidecar_id("node" + std::to_string(rank) + "/1/00");
    REQUIRE(rw->Write(hello));
    v1::SidecarMessage m;
    v1::StepBatch* b = m.mutable_batch();
    b->set_batch_seq(1);
    Declare(b, rank, "j", world);
    wire::PackedStepsEncoder e(2);
    const int64_t durations[] = {1'000'000, 2'000'000};
    for (int step = 0; step < steps; ++step) e.Add(step, durations, 0);
    *b->add_steps() = wire::MakeRankSteps("j", rank, e);
    REQUIRE(rw->Write(m));
  }
  // The batch's acknowledgement.
  v1::BatchAck Ack() {
    v1::CoordinatorMessage reply;
    while (rw->Read(&reply)) {
      if (reply.has_ack()) return reply.ack();
    }
    FAIL("stream ended before the ack: " << rw->Finish().error_message());
    return {};
  }
  grpc::Status End() {
    rw->WritesDone();
    v1::CoordinatorMessage m;
    while (rw->Read(&m)) {
    }
    return rw->Finish();
  }
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Ingest::Stub> stub;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SidecarMessage, v1::CoordinatorMessage>> rw;
};

grpc::Status ListJobs(const std::shared_ptr<grpc::Channel>& channel, v1::ListJobsReply* reply) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return v1::Query::NewStub(channel)->ListJobs(&ctx, {}, reply);
}

// The streams open on each shard, by the gauges.
std::vector<double> ShardStreams(CoordinatorServer& server) {
  std::vector<double> streams;
  for (int i = 0; i < server.metrics().ingest_shards(); ++i) {
    streams.push_back(server.metrics().ingest_shard_streams(i).Value());
  }
  return streams;
}

double Sum(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum;
}

TEST_CASE("16 sidecars on connections of their own stream and query through every shard") {
  for (const int shards : {4, 1}) {
    INFO("--ingest-shards " << shards);
    CoordinatorServer server(Options(shards));
    REQUIRE(server.Start().ok());
    REQUIRE(server.port() > 0);
    constexpr int kSidecars = 16;
    constexpr int kSteps = 10;
    std::vector<std::unique_ptr<Sidecar>> sidecars;
    for (int i = 0; i < kSidecars; ++i) {
      sidecars.push_back(
          std::make_unique<Sidecar>(OwnChannel(server.port(), i), i, kSidecars, kSteps));
    }
    for (auto& s : sidecars) CHECK(s->Ack().rejections_size() == 0);
    // All 16 streams open at once; with several shards the kernel spread them (all on one of
    // 4 shards: a chance of 4^-15).
    const std::vector<double> open = ShardStreams(server);
    if (shards > 1) {
      REQUIRE(open.size() == static_cast<size_t>(shards));
      CHECK(Sum(open) == kSidecars);
      int used = 0;
      for (double n : open) used += n > 0 ? 1 : 0;
      CHECK(used >= 2);
    } else {
      CHECK(open.empty());  // one server: no per-shard series
    }
    // Each connection reaches the (synchronous) query service too, and sees the whole job.
    int64_t accounted = 0;
    for (int tries = 0; tries < 100 && accounted < kSteps; ++tries) {
      for (auto& s : sidecars) {
        v1::ListJobsReply jobs;
        REQUIRE(ListJobs(s->channel, &jobs).ok());
        REQUIRE(jobs.jobs_size() == 1);
        CHECK(jobs.jobs(0).world_size() == kSidecars);
        accounted = jobs.jobs(0).steps_accounted();
        CHECK(jobs.jobs(0).partial_steps() == 0);
      }
      if (accounted < kSteps) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    CHECK(accounted == kSteps);
    for (auto& s : sidecars) CHECK(s->End().ok());
    // Each shard's count goes back to 0 as its calls end.
    for (int tries = 0; tries < 100 && Sum(ShardStreams(server)) > 0; ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    CHECK(Sum(ShardStreams(server)) == 0);
    server.Shutdown();
  }
}

// Regression (issue 30, item 4) with shards: their sockets ask SO_REUSEPORT, so without the
// look at the port first a second coordinator would join the first one's port and take part
// of its calls.
// The coordinator runs no HTTP/2 keepalive, which was what closed a connection nobody used any
// more: a connection that holds no call (a client that connects and never calls, a vanished
// sidecar's capture channel) is closed after --idle-timeout-ms instead.
TEST_CASE("a connection that holds no call is closed after --idle-timeout-ms") {
  CoordinatorOptions o = Options(1);
  o.limits.idle_timeout_ms = 500;
  CoordinatorServer server(o);
  REQUIRE(server.Start().ok());
  std::shared_ptr<grpc::Channel> idle = OwnChannel(server.port(), 0);
  REQUIRE(idle->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5)));
  // The server's GOAWAY takes the channel out of READY (to IDLE: it reconnects when asked).
  bool left_ready = false;
  for (int i = 0; i < 50 && !left_ready; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left_ready = idle->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_READY;
  }
  CHECK(left_ready);
  // A call on it afterwards still works: a new connection.
  v1::ListJobsReply jobs;
  CHECK(ListJobs(idle, &jobs).ok());
}

TEST_CASE("a second coordinator on the port is refused, whatever its shards") {
  for (const int first_shards : {4, 1}) {
    INFO("first coordinator: --ingest-shards " << first_shards);
    CoordinatorServer first(Options(first_shards));
    REQUIRE(first.Start().ok());
    const std::string listen = "127.0.0.1:" + std::to_string(first.port());
    for (const int shards : {4, 1, 16}) {
      INFO("second coordinator: --ingest-shards " << shards);
      CoordinatorServer second(Options(shards, listen));
      absl::Status s = second.Start();
      CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
      CHECK(std::string(s.message()) ==
            "cannot listen on " + listen +
                " (another process, perhaps another coordinator, may hold it)");
    }
    // The first one serves every new connection.
    for (int i = 0; i < 8; ++i) {
      v1::ListJobsReply jobs;
      CHECK(ListJobs(OwnChannel(first.port(), i), &jobs).ok());
    }
  }
}

TEST_CASE("a port a gRPC server holds with SO_REUSEPORT is refused") {
  // gRPC servers ask SO_REUSEPORT by default: the shards alone would share its port.
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  v1::Query::Service unimplemented;  // a server needs a service to start
  builder.RegisterService(&unimplemented);
  std::unique_ptr<grpc::Server> other = builder.BuildAndStart();
  REQUIRE(port > 0);
  CoordinatorServer coordinator(Options(4, "127.0.0.1:" + std::to_string(port)));
  absl::Status s = coordinator.Start();
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("cannot listen on 127.0.0.1:"));
  other->Shutdown();
}

}  // namespace
}  // namespace stagefrontier
