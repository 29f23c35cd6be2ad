#include "daemon/common/log_throttle.h"

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

using Clock = LogThrottle::Clock;

TEST_CASE("log throttle: once at once, then once per interval with the tally since") {
  LogThrottle t(std::chrono::seconds(60));
  const Clock::time_point t0 = Clock::now();
  CHECK(t.Pass("rank 3 refused", 5, t0) == 5u);  // the first: at once
  CHECK_FALSE(t.Pass("rank 3 refused", 5, t0 + std::chrono::seconds(1)));
  CHECK_FALSE(t.Pass("rank 3 refused", 7, t0 + std::chrono::seconds(59)));
  CHECK(t.Pass("other", 1, t0 + std::chrono::seconds(59)) == 1u);            // keys apart
  CHECK(t.Pass("rank 3 refused", 3, t0 + std::chrono::seconds(60)) == 15u);  // 5 + 7 + 3
  CHECK_FALSE(t.Pass("rank 3 refused", 1, t0 + std::chrono::seconds(61)));
}

TEST_CASE("log throttle: bounded in keys") {
  LogThrottle t(std::chrono::seconds(60), 2);
  const Clock::time_point t0 = Clock::now();
  CHECK(t.Pass("a", 1, t0));
  CHECK(t.Pass("b", 1, t0));
  CHECK(t.Pass("c", 1, t0));  // forgets the others
  CHECK(t.Pass("a", 1, t0));  // said again: bounded memory over exactness
}

}  // namespace
}  // namespace stagefrontier
