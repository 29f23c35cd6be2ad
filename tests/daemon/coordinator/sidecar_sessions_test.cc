// Node names bound to the connected sidecar: lanes and reconnects of the holder welcome,
// another sidecar refused and the node flagged, a silent holder (a machine that went away with
// its connections half-open) replaced.
#include "daemon/coordinator/sidecar_sessions.h"

#include <catch2/catch.hpp>

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

}  // namespace
}  // namespace stagefrontier
