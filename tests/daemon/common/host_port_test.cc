// SplitHostPort: the last colon splits, IPv6 brackets come off, no colon is no address.
#include "daemon/common/host_port.h"

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

TEST_CASE("HOST:PORT splits at the last colon, IPv6 without brackets") {
  auto v4 = SplitHostPort("127.0.0.1:7311");
  REQUIRE(v4);
  CHECK(v4->host == "127.0.0.1");
  CHECK(v4->port == "7311");
  auto v6 = SplitHostPort("[::1]:0");
  REQUIRE(v6);
  CHECK(v6->host == "::1");
  CHECK(v6->port == "0");
  auto empty = SplitHostPort(":x");
  REQUIRE(empty);
  CHECK(empty->host.empty());
  CHECK(empty->port == "x");
  CHECK_FALSE(SplitHostPort("localhost"));
  CHECK(SplitHostPort("[]:1")->host == "[]");  // nothing inside: left as written
}

}  // namespace
}  // namespace stagefrontier
