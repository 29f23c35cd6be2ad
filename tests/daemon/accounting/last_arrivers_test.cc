// Who arrived last at a wait (last_arrivers.h): the late set of a window step, against the
// plain two-pass reading of its definition.
#include "daemon/accounting/last_arrivers.h"

#include <catch2/catch.hpp>
#include <limits>
#include <random>

#include "tests/daemon/accounting/window_fixture.h"

namespace stagefrontier::testing {
namespace {

// The members of `member`'s wait group present in step i whose wait in stage k is within tol
// of the group's shortest: the shortest found first, then the members listed.
std::vector<int32_t> PlainLateSet(const AccountingWindow& w, const GroupMembers& members, size_t i,
                                  int k, int member, int64_t tol) {
  const int32_t group = members.wait_group[member];
  int64_t shortest = std::numeric_limits<int64_t>::max();
  for (int m = 0; m < w.members(); ++m) {
    if (members.wait_group[m] == group && w.present(i, m)) {
      shortest = std::min(shortest, w.duration(i, m, k));
    }
  }
  std::vector<int32_t> out;
  for (int m = 0; m < w.members(); ++m) {
    if (members.wait_group[m] == group && w.present(i, m) &&
        w.duration(i, m, k) <= shortest + tol) {
      out.push_back(m);
    }
  }
  return out;
}

TEST_CASE("the late set: the shortest waits within noise, in member order", "[last_arrivers]") {
  constexpr int kMembers = 60;
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int64_t> wait(1'000'000, 1'400'000);
  // Step 0: waits falling member after member (every member is within noise of the shortest so
  // far when it comes); step 1: random, a tenth absent; step 2: two members tie for shortest.
  WindowBuilder w(kMembers, "data:io,sync:sync");
  w.Step([](int m, int k) -> int64_t { return k == 0 ? 1'000'000 : 5'000'000 - m * 50'000; });
  std::vector<int64_t> random(kMembers);
  for (int64_t& r : random) r = wait(rng);
  w.Step([&](int m, int k) -> int64_t {
    return m % 10 == 3 ? -1 : k == 0 ? 1'000'000 : random[m];
  });
  w.Step([](int m, int k) -> int64_t {
    return k == 0 ? 1'000'000 : m == 7 || m == 40 ? 900'000 : 2'000'000 + m;
  });
  // Two wait groups (odd and even members) and one.
  std::vector<int32_t> ranks(kMembers), parity(kMembers);
  for (int m = 0; m < kMembers; ++m) {
    ranks[m] = m;
    parity[m] = m % 2;
  }
  const EngineConfig config;  // tol = tie_z x 100 us (the fixture's peer noise)
  const int64_t tol = static_cast<int64_t>(config.tie_z * 100'000);
  for (const GroupMembers& members : {GroupMembers(ranks, {}), GroupMembers(ranks, parity)}) {
    const LastArrivers arrivers(w.window(), w.schema(), members, config);
    std::vector<int32_t> got;
    for (size_t i = 0; i < 3; ++i) {
      for (int member : {0, 1, 7, 40}) {
        INFO("step " << i << " member " << member);
        arrivers.LateSet(i, 1, member, &got);
        CHECK(got == PlainLateSet(w.window(), members, i, 1, member, tol));
      }
    }
  }
  // Not empty answers: the falling waits end with the last members, the tie has both.
  const GroupMembers one(ranks, {});
  const LastArrivers arrivers(w.window(), w.schema(), one, config);
  std::vector<int32_t> late;
  arrivers.LateSet(2, 1, 0, &late);
  CHECK(late == std::vector<int32_t>{7, 40});
  arrivers.LateSet(0, 1, 0, &late);
  CHECK(!late.empty());
  CHECK(late.back() == kMembers - 1);
}

}  // namespace
}  // namespace stagefrontier::testing
