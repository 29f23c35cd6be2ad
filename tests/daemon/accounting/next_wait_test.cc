// The wait that tells who arrived last: empty wait stages (a role's send that never happens)
// are skipped, a wait anyone spent time in is not, and a step without one gives none.
#include "daemon/accounting/next_wait.h"

#include <catch2/catch.hpp>

#include "tests/daemon/accounting/window_fixture.h"

namespace stagefrontier {
namespace {

using testing::WindowBuilder;

constexpr const char* kSchema = "fwd:compute,send:sync,recv:sync,bwd:compute,dp_sync:sync";

TEST_CASE("a wait stage empty on every member is skipped for the next one") {
  WindowBuilder b(2, kSchema);
  // Step 0: send and recv empty (5 us) on both members; dp_sync waited.
  b.Step([](int, int k) -> int64_t { return k == 1 || k == 2 ? 5'000 : 1'000'000; });
  // Step 1: member 1 spent 60 us in recv: that wait decides.
  b.Step([](int m, int k) -> int64_t {
    if (k == 1) return 5'000;
    if (k == 2) return m == 1 ? 60'000 : 5'000;
    return 1'000'000;
  });
  // Step 2: every wait empty.
  b.Step([](int, int k) -> int64_t { return k == 0 || k == 3 ? 1'000'000 : 1'000; });
  const StageSchema schema = *StageSchema::Parse(kSchema);
  CHECK(NextWaitThatWaited(b.window(), schema, 0, /*after=*/0) == 4u);
  CHECK(NextWaitThatWaited(b.window(), schema, 0, /*after=*/-1) == 4u);
  CHECK(NextWaitThatWaited(b.window(), schema, 1, /*after=*/0) == 2u);
  CHECK(NextWaitThatWaited(b.window(), schema, 1, /*after=*/2) == 4u);
  CHECK_FALSE(NextWaitThatWaited(b.window(), schema, 0, /*after=*/4).has_value());
  CHECK_FALSE(NextWaitThatWaited(b.window(), schema, 2, /*after=*/0).has_value());
}

TEST_CASE("the wait after a stage: this step's, else the next step's first that waited") {
  WindowBuilder b(2, kSchema);
  // Step 0: only dp_sync waited; step 1: recv waited; step 2: nothing waited.
  b.Step([](int, int k) -> int64_t { return k == 1 || k == 2 ? 5'000 : 1'000'000; });
  b.Step([](int m, int k) -> int64_t {
    if (k == 1) return 5'000;
    if (k == 2) return m == 1 ? 60'000 : 5'000;
    return k == 4 ? 5'000 : 1'000'000;
  });
  b.Step([](int, int k) -> int64_t { return k == 0 || k == 3 ? 1'000'000 : 1'000; });
  const StageSchema schema = *StageSchema::Parse(kSchema);
  std::optional<WaitAt> w = WaitAfter(b.window(), schema, 0, /*k=*/0);
  REQUIRE(w.has_value());
  CHECK(w->index == 0);
  CHECK(w->stage == 4u);
  // After step 0's last wait: step 1's first wait that waited (recv).
  w = WaitAfter(b.window(), schema, 0, /*k=*/4);
  REQUIRE(w.has_value());
  CHECK(w->index == 1);
  CHECK(w->stage == 2u);
  // Step 1's later waits (dp_sync 5 us) waited for nobody, and step 2 has none either.
  CHECK_FALSE(WaitAfter(b.window(), schema, 1, /*k=*/3).has_value());
  // The window's last step: no next step to look in.
  CHECK_FALSE(WaitAfter(b.window(), schema, 2, /*k=*/0).has_value());
}

TEST_CASE("an absent member's durations do not count") {
  WindowBuilder b(2, kSchema);
  // Member 1 absent (negative durations): its would-be wait is not evidence.
  b.Step([](int m, int k) -> int64_t {
    if (m == 1) return -1;
    return k == 0 || k == 3 ? 1'000'000 : 2'000;
  });
  const StageSchema schema = *StageSchema::Parse(kSchema);
  CHECK_FALSE(NextWaitThatWaited(b.window(), schema, 0, 0).has_value());
}

}  // namespace
}  // namespace stagefrontier
