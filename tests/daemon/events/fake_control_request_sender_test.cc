// The fake sender the captures tests use reaches only the ranks it serves, as SidecarSessions
// reaches only bound ranks.
#include "tests/daemon/events/fake_control_request_sender.h"

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

v1::ControlRequest To(const std::string& job, int32_t rank) {
  v1::ControlRequest r;
  r.set_job(job);
  r.set_rank(rank);
  return r;
}

TEST_CASE("a fake sender reaches served ranks only, and keeps what reached them") {
  testing::FakeControlRequestSender sender;
  ControlRequestSender& s = sender;
  CHECK(s.Send(To("run", 1)) == 0);
  sender.Serve("run", {0, 1});
  CHECK(s.Send(To("run", 1)) == 1);
  CHECK(s.Send(To("run", -1)) == 2);  // every served rank of the job
  CHECK(s.Send(To("other", 1)) == 0);
  REQUIRE(sender.Sent().size() == 2);
  CHECK(sender.SentTo({1}).size() == 1);
}

}  // namespace
}  // namespace stagefrontier
