// RaiseDescriptorLimit: up to what is wanted, never past the hard limit, never down.
#include "daemon/common/descriptor_limit.h"

#include <sys/resource.h>

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

rlimit Current() {
  rlimit l{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &l) == 0);
  return l;
}

TEST_CASE("the soft descriptor limit is raised to what is wanted, within the hard limit") {
  const rlimit saved = Current();
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 256) {
    WARN("the hard limit is below 256 here: nothing to check");
    return;
  }
  rlimit low = saved;
  low.rlim_cur = 64;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);

  absl::StatusOr<uint64_t> got = RaiseDescriptorLimit(200);
  REQUIRE(got.ok());
  CHECK(*got == 200);
  CHECK(Current().rlim_cur == 200);

  // Never lowered.
  got = RaiseDescriptorLimit(100);
  REQUIRE(got.ok());
  CHECK(*got == 200);

  // Never past the hard limit (the soft limit stops there).
  if (saved.rlim_max != RLIM_INFINITY) {
    got = RaiseDescriptorLimit(static_cast<uint64_t>(saved.rlim_max) + 1000);
    REQUIRE(got.ok());
    CHECK(*got == saved.rlim_max);
  }
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
}

}  // namespace
}  // namespace stagefrontier
