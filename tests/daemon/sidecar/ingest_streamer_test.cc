// The sidecar's streamer against a fake coordinator: the health of ranks a batch declares rides
// that batch (StepBatch.health) when the coordinator's StreamLimits says batch_health, and goes
// as a Health message of its own right before the batch when it does not (a coordinator from
// before 2026-11-30 would ignore StepBatch.health).
#include "daemon/sidecar/ingest_streamer.h"

#include <grpcpp/grpcpp.h>
#include <stdlib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "shm/ring_writer.h"
#include "shm/slot_ownership.h"
#include "tests/daemon/sidecar/test_segment.h"

namespace stagefrontier {
namespace {

using std::chrono::milliseconds;

// Says Hello's StreamLimits (batch_health as asked), keeps every message and acknowledges
// every batch.
class FakeCoordinator final : public v1::Ingest::Service {
 public:
  explicit FakeCoordinator(bool batch_health) : batch_health_(batch_health) {}

  grpc::Status Stream(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::SidecarMessage>* rw) override {
    v1::SidecarMessage m;
    if (!rw->Read(&m) || !m.has_hello()) return {grpc::FAILED_PRECONDITION, "no Hello"};
    v1::CoordinatorMessage limits;
    v1::StreamLimits* l = limits.mutable_limits();
    l->set_silent_after_ms(4750);
    l->set_idle_timeout_ms(60'000);
    l->set_step_deadline_ms(10'000);
    l->set_batch_health(batch_health_);
    if (!rw->Write(limits)) return grpc::Status::OK;
    while (rw->Read(&m)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        got_.push_back(m);
      }
      if (!m.has_batch()) continue;
      v1::CoordinatorMessage ack;
      ack.mutable_ack()->set_batch_seq(m.batch().batch_seq());
      if (!rw->Write(ack)) break;
    }
    return grpc::Status::OK;
  }

  std::vector<v1::SidecarMessage> got() {
    std::lock_guard<std::mutex> lock(mu_);
    return got_;
  }

 private:
  const bool batch_health_;
  std::mutex mu_;
  std::vector<v1::SidecarMessage> got_;
};

// Runs a streamer against a FakeCoordinator until the 10 records of one rank, written once the
// streamer has taken the coordinator's limits, are acknowledged; returns what the coordinator
// got, in order.
std::vector<v1::SidecarMessage> RunOnce(bool batch_health, StreamerCounters* counters_out) {
  char tmpl[] = "/tmp/sf_streamer_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  FakeCoordinator fake(batch_health);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.RegisterService(&fake);
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  REQUIRE(server != nullptr);

  DrainerOptions drainer_options;
  drainer_options.dir = dir;
  SegmentDrainer drainer(drainer_options, [](const std::string&) {});
  REQUIRE(drainer.Start().ok());
  StreamerOptions o;
  o.coordinator = "127.0.0.1:" + std::to_string(port);
  o.node = "n0";
  o.rescan_every = milliseconds(20);
  o.batch_hold.max_hold_ns = 100'000'000;  // a test need not wait for the 9 s hold
  std::atomic<bool> limits_taken{false};
  IngestStreamer streamer(o, &drainer, [&](const std::string& line) {
    if (line.find("batches held at most") != std::string::npos) limits_taken = true;
  });
  std::thread run([&] { streamer.Run(); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!limits_taken && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  CHECK(limits_taken);

  auto seg = NewSegment(dir, "jobx", 1);
  REQUIRE(seg.ok());
  REQUIRE(shm::ClaimSlot((*seg)->view(), 0, ThreeStages(0, 1, 1)).ok());
  shm::RingWriter w((*seg)->view(), 0);
  for (int s = 0; s < 10; ++s) {
    const int64_t b[] = {1000, 2000, 3000, 3500};
    REQUIRE(w.TryPublish(s, 3500, 0, b, 3));
  }
  while (streamer.counters().records_acked < 10 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  CHECK(streamer.counters().records_acked == 10);
  streamer.Stop();
  run.join();
  server->Shutdown(std::chrono::system_clock::now() + milliseconds(500));
  counters_out->health_sent = streamer.counters().health_sent.load();
  counters_out->health_riding = streamer.counters().health_riding.load();
  return fake.got();
}

// The first batch that declares rank 0 of jobx, and the message before it.
void FindDeclaring(const std::vector<v1::SidecarMessage>& got, const v1::SidecarMessage** batch,
                   const v1::SidecarMessage** before) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].has_batch() && got[i].batch().declarations_size() > 0) {
      *batch = &got[i];
      *before = i > 0 ? &got[i - 1] : nullptr;
      return;
    }
  }
}

bool HealthOfRank0(const v1::Health& h) {
  return h.slots_size() == 1 && h.slots(0).job() == "jobx" && h.slots(0).rank() == 0;
}

TEST_CASE("to a coordinator that reads StepBatch.health, the new ranks' health rides the batch") {
  StreamerCounters counters;
  const std::vector<v1::SidecarMessage> got = RunOnce(/*batch_health=*/true, &counters);
  const v1::SidecarMessage* batch = nullptr;
  const v1::SidecarMessage* before = nullptr;
  FindDeclaring(got, &batch, &before);
  REQUIRE(batch != nullptr);
  REQUIRE(batch->batch().has_health());
  CHECK(HealthOfRank0(batch->batch().health()));
  CHECK((before == nullptr || !before->has_health()));  // not sent twice
  CHECK(counters.health_riding >= 1);
}

TEST_CASE("to an older coordinator, health goes alone, right before the batch") {
  StreamerCounters counters;
  const std::vector<v1::SidecarMessage> got = RunOnce(/*batch_health=*/false, &counters);
  const v1::SidecarMessage* batch = nullptr;
  const v1::SidecarMessage* before = nullptr;
  FindDeclaring(got, &batch, &before);
  REQUIRE(batch != nullptr);
  REQUIRE(before != nullptr);
  REQUIRE(before->has_health());
  CHECK(HealthOfRank0(before->health()));
  for (const v1::SidecarMessage& m : got) CHECK_FALSE((m.has_batch() && m.batch().has_health()));
  CHECK(counters.health_riding == 0);
  CHECK(counters.health_sent >= 1);
}

}  // namespace
}  // namespace stagefrontier
