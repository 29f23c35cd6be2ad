// A rank that leaves a collective late, told from a late start of its peer.
#include "daemon/accounting/exit_lag.h"

#include <catch2/catch.hpp>

#include "tests/daemon/accounting/window_fixture.h"

namespace stagefrontier::testing {
namespace {

// apply:compute between dp_sync and loss_sync; 1 ms everywhere but the waits.
constexpr const char* kSchema = "fwd:compute,dp_sync:sync,apply:compute,loss_sync:sync";

TEST_CASE("exit lag: the rank that left dp_sync late, against loss_sync", "[verdict_steps]") {
  for (const int members : {2, 4}) {
    WindowBuilder b(members, kSchema);
    for (int i = 0; i < 40; ++i) {
      const int64_t jitter = (i % 5) * 20'000;
      // Member 1 leaves dp_sync 2 ms (plus jitter) after the others and so waits 2 ms less at
      // loss_sync: both waits end together for everyone.
      b.Step([&](int m, int k) -> int64_t {
        if (k == 1) return m == 1 ? 5'000'000 + jitter : 3'000'000;
        if (k == 3) return m == 1 ? 1'000'000 - jitter : 3'000'000;
        return 1'000'000;
      });
    }
    INFO(members << " members");
    const ExitLag lag = LargestExitLag(b.window(), b.schema(), 1);
    CHECK(lag.member == 1);
    CHECK(lag.next_wait == 3);
    CHECK(lag.steps == 40);
    CHECK(lag.mean_ns == Approx(2'040'000).margin(1));
    CHECK(lag.z > 50);
  }
}

TEST_CASE("exit lag: a late start of the peer is no exit lag", "[verdict_steps]") {
  WindowBuilder b(2, kSchema);
  for (int i = 0; i < 40; ++i) {
    // Member 0 started 2 ms late: it waits 2 ms less at dp_sync, and the same at loss_sync.
    const int64_t jitter = (i % 5) * 20'000;
    b.Step([&](int m, int k) -> int64_t {
      if (k == 1) return m == 0 ? 1'000'000 + jitter : 3'000'000;
      if (k == 3) return 3'000'000;
      return 1'000'000;
    });
  }
  const ExitLag lag = LargestExitLag(b.window(), b.schema(), 1);
  CHECK(lag.mean_ns == Approx(0).margin(1));
  CHECK(lag.z == 0);
}

TEST_CASE("exit lag: no later wait, not a wait, too few steps", "[verdict_steps]") {
  WindowBuilder b(2, kSchema);
  for (int i = 0; i < 5; ++i) b.Step([](int, int) { return 1'000'000; });
  CHECK(LargestExitLag(b.window(), b.schema(), 1).member == -1);  // 5 steps
  for (int i = 0; i < 10; ++i) b.Step([](int, int) { return 1'000'000; });
  CHECK(LargestExitLag(b.window(), b.schema(), 1).member >= 0);
  CHECK(LargestExitLag(b.window(), b.schema(), 3).member == -1);  // the step's last wait
  CHECK(LargestExitLag(b.window(), b.schema(), 2).member == -1);  // apply is no wait
  CHECK(LargestExitLag(b.window(), b.schema(), 9).member == -1);
}

}  // namespace
}  // namespace stagefrontier::testing
