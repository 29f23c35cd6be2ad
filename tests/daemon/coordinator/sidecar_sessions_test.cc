// Node names bound to the connected sidecar: lanes and reconnects of the holder welcome,
// another sidecar refused and the node flagged, a silent holder (a machine that went away with
// its connections half-open) replaced.
#include "daemon/coordinator/sidecar_sessions.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

namespace stagefrontier {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

TEST_CASE("sessions: the holder's streams are welcome, another sidecar is refused") {
  SidecarSessions sessions;
  auto a = sessions.Add("node1", "node1/10/aa", "10.0.0.1", nullptr, kSecond);
  REQUIRE(a.ok());
  auto lane = sessions.Add("node1", "node1/10/aa", "10.0.0.1", nullptr, kSecond);
  REQUIRE(lane.ok());
  const auto other = sessions.Add("node1", "node1/66/bb", "10.0.0.1", nullptr, 2 * kSecond);
  CHECK(absl::IsAlreadyExists(other.status()));
  const auto elsewhere = sessions.Add("node1", "node1/10/aa", "10.0.0.9", nullptr, 2 * kSecond);
  CHECK(absl::IsAlreadyExists(elsewhere.status()));  // the same id from another machine
  CHECK(sessions.conflicts() == 2);
  CHECK_THAT(sessions.InConflict("node1"), Catch::Contains("10.0.0.9"));
  CHECK(sessions.Add("node2", "node2/1/cc", "10.0.0.2", nullptr, 2 * kSecond).ok());
  // Once every stream of the holder has ended, the name is free.
  sessions.Remove(*a);
  CHECK_FALSE(sessions.Add("node1", "node1/66/bb", "10.0.0.1", nullptr, 3 * kSecond).ok());
  sessions.Remove(*lane);
  CHECK(sessions.Add("node1", "node1/66/bb", "10.0.0.1", nullptr, 3 * kSecond).ok());
}

TEST_CASE("sessions: a holder silent for 30 s gives its node name way") {
  SidecarSessions sessions;
  auto old = sessions.Add("node1", "node1/10/aa", "10.0.0.1", nullptr, kSecond);
  REQUIRE(old.ok());
  SidecarSessions::Touch(**old, 20 * kSecond);  // its last message
  CHECK_FALSE(sessions.Add("node1", "node1/11/bb", "10.0.0.1", nullptr, 49 * kSecond).ok());
  auto fresh = sessions.Add("node1", "node1/11/bb", "10.0.0.1", nullptr, 50 * kSecond);
  REQUIRE(fresh.ok());
  // The old half-open stream ends at last: the new holder keeps the name.
  sessions.Remove(*old);
  CHECK_FALSE(sessions.Add("node1", "node1/12/cc", "10.0.0.1", nullptr, 51 * kSecond).ok());
  sessions.Remove(*fresh);
  CHECK(sessions.Add("node1", "node1/12/cc", "10.0.0.1", nullptr, 52 * kSecond).ok());
}

// Records what a session was sent.
class RecordingWriter : public SessionWriter {
 public:
  bool Send(const v1::CoordinatorMessage& message) override {
    ranks.push_back(message.control().rank());
    return true;
  }
  std::vector<int32_t> ranks;
};

v1::ControlRequest RequestFor(const std::string& job, int32_t rank) {
  v1::ControlRequest r;
  r.set_job(job);
  r.set_rank(rank);
  return r;
}

TEST_CASE("sessions: a request reaches the stream that serves the rank, a moved rank its new one") {
  SidecarSessions sessions;
  RecordingWriter wa, wb;
  auto a = sessions.Add("node1", "node1/10/aa", "10.0.0.1", &wa, kSecond);
  auto b = sessions.Add("node2", "node2/10/bb", "10.0.0.2", &wb, kSecond);
  REQUIRE((a.ok() && b.ok()));
  CHECK(sessions.Bind(*a, "job", 0));
  CHECK_FALSE(sessions.Bind(*a, "job", 0));  // already
  CHECK(sessions.Bind(*a, "job", 1));
  CHECK(sessions.Bind(*b, "job", 2));
  CHECK(sessions.Send(RequestFor("job", 1)) == 1);
  CHECK(sessions.Send(RequestFor("job", -1)) == 2);  // each serving session once
  CHECK(sessions.Send(RequestFor("other", 1)) == 0);
  // Rank 1 is declared again on b (a restarted sidecar's stream): b serves it, and a's end
  // does not take it from b.
  CHECK(sessions.Bind(*b, "job", 1));
  sessions.Remove(*a);
  wb.ranks.clear();
  CHECK(sessions.Send(RequestFor("job", 1)) == 1);
  CHECK(sessions.Send(RequestFor("job", 0)) == 0);  // a's own rank went with it
  CHECK(wb.ranks == std::vector<int32_t>{1});
  // b forgets the job: nothing of it is routed any more; another job's ranks stay.
  CHECK(sessions.Bind(*b, "next", 5));
  sessions.Forget(*b, "job");
  CHECK(sessions.Send(RequestFor("job", -1)) == 0);
  CHECK(sessions.Send(RequestFor("next", 5)) == 1);
  sessions.Remove(*b);
  CHECK(sessions.Send(RequestFor("next", 5)) == 0);
}

TEST_CASE("sessions: a stream's end costs its own bindings, not every rank of the job") {
  // 12,500 streams of 8 ranks each (a 100,000-rank job): each Remove and Forget visits only the
  // 8 slots its stream was bound to.
  SidecarSessions sessions;
  constexpr int kStreams = 12'500;
  constexpr int kRanks = 8;
  std::vector<std::shared_ptr<SidecarSessions::Session>> all;
  for (int s = 0; s < kStreams; ++s) {
    auto session = sessions.Add("", "", "", nullptr, kSecond);
    REQUIRE(session.ok());
    for (int r = 0; r < kRanks; ++r) sessions.Bind(*session, "job", s * kRanks + r);
    all.push_back(*session);
  }
  for (int s = 0; s < kStreams; s += 2) sessions.Forget(all[s], "job");
  for (const auto& session : all) sessions.Remove(session);
  CHECK(sessions.slot_visits() == static_cast<int64_t>(kStreams) * kRanks);
  CHECK(sessions.Send(RequestFor("job", -1)) == 0);
  CHECK(sessions.size() == 0);
}

}  // namespace
}  // namespace stagefrontier
