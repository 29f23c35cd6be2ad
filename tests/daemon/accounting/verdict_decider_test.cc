// The verdict pipeline end to end on hand-made windows (the simulator scenarios are in
// scenarios_test and verdict_golden_test).
#include "daemon/accounting/verdict_decider.h"

#include <catch2/catch.hpp>
#include <functional>
#include <random>

#include "tests/daemon/accounting/window_fixture.h"

namespace stagefrontier::testing {
namespace {

constexpr int64_t kMs = 1'000'000;

TEST_CASE("decider: an empty window has no verdict yet", "[verdict_steps]") {
  WindowBuilder b(2, "data:io,sync:sync");
  const GroupMembers members({0, 1}, {});
  const std::string group = "job";
  VerdictDecision d;
  const Verdict v =
      VerdictDecider({group, b.window(), b.schema(), EngineConfig{}, members, {}, {}}).Decide(&d);
  CHECK(v.group == "job");
  CHECK(v.label == VerdictLabel::kHealthy);
  CHECK(d.kind == VerdictKind::kNoSteps);
  CHECK(v.explanation == "no steps accounted yet");
}

TEST_CASE("decider: a window with little excess is HEALTHY at the gate", "[verdict_steps]") {
  WindowBuilder b(2, "data:io,sync:sync");
  for (int i = 0; i < 10; ++i) {
    b.Step([](int, int) { return kMs; },
           i < 2 ? std::vector{Charge(0, {1}, kMs)} : std::vector<Attribution>{});
  }
  const GroupMembers members({0, 1}, {});
  const std::string group = "job";
  VerdictDecision d;
  const Verdict v =
      VerdictDecider({group, b.window(), b.schema(), EngineConfig{}, members, {}, {}}).Decide(&d);
  CHECK(d.kind == VerdictKind::kWithinNoise);
  CHECK(v.flagged_steps == 2);
  CHECK(v.steps == 10);
  CHECK(v.total_excess_ns == 2 * kMs);
  REQUIRE(v.excess_cells.size() == 1);
  CHECK(v.excess_cells[0].rank == 1);
  CHECK(v.suspects.empty());
}

TEST_CASE("decider: a persistent data stall on one rank is CLEAR", "[verdict_steps]") {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0, 50'000);
  WindowBuilder b(4, "data:io,compute:compute,sync:sync");
  for (int i = 0; i < 50; ++i) {
    std::vector<int64_t> d(12);
    for (int m = 0; m < 4; ++m) {
      d[m * 3 + 0] = static_cast<int64_t>(kMs + noise(rng)) + (m == 3 ? 5 * kMs : 0);
      d[m * 3 + 1] = static_cast<int64_t>(10 * kMs + noise(rng));
    }
    // Everyone leaves the sync together: the stalled rank waits least.
    int64_t end = 0;
    for (int m = 0; m < 4; ++m) end = std::max(end, d[m * 3] + d[m * 3 + 1]);
    for (int m = 0; m < 4; ++m) d[m * 3 + 2] = end + kMs - d[m * 3] - d[m * 3 + 1];
    b.Step([&](int m, int k) { return d[m * 3 + k]; },
           {Charge(0, {3}, 5 * kMs, AttributionKind::kFrontierLeader, 5 * kMs)});
  }
  const GroupMembers members({0, 1, 2, 3}, {});
  const std::string group = "job";
  VerdictDecision d;
  const Verdict v =
      VerdictDecider({group, b.window(), b.schema(), EngineConfig{}, members, {}, {}}).Decide(&d);
  INFO(v.explanation);
  CHECK(d.kind == VerdictKind::kClear);
  CHECK(LabelText(v) == "CLEAR");
  CHECK(v.candidate_ranks == std::vector<int32_t>{3});
  CHECK(v.wait_agreement == 1.0);
  CHECK(v.explanation.rfind("\"data\" on rank 3 holds 100% of the excess", 0) == 0);
}

// One tensor position's group of a tensor-parallel job: its two members (one per replica)
// over 50 steps of data, fwd and bwd (tensor stages), dp_sync and apply, with 0.2 ms of noise;
// `extra(i, m, k)` adds to member m's stage k in step i, and every 10th step charges `charge`.
// Both members leave dp_sync together: the later arrival waits less.
Verdict DecideTensorPair(uint64_t seed, const std::function<int64_t(int, int, int)>& extra,
                         const Attribution& charge, VerdictDecision* d) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, 200'000);
  WindowBuilder b(2, "data:io,fwd:tensor,bwd:tensor,dp_sync:sync,apply:compute");
  for (int i = 0; i < 50; ++i) {
    std::vector<int64_t> dur(10);
    for (int m = 0; m < 2; ++m) {
      int64_t* x = &dur[m * 5];
      x[0] = static_cast<int64_t>(kMs + noise(rng)) + extra(i, m, 0);
      x[1] = static_cast<int64_t>(10 * kMs + noise(rng)) + extra(i, m, 1);
      x[2] = static_cast<int64_t>(10 * kMs + noise(rng)) + extra(i, m, 2);
      x[4] = static_cast<int64_t>(kMs / 2 + noise(rng) / 10);
    }
    const int64_t end = std::max(dur[0] + dur[1] + dur[2], dur[5] + dur[6] + dur[7]) + kMs;
    for (int m = 0; m < 2; ++m) {
      dur[m * 5 + 3] = end - dur[m * 5] - dur[m * 5 + 1] - dur[m * 5 + 2];
    }
    b.Step([&](int m, int k) { return dur[m * 5 + k]; },
           i % 10 == 0 ? std::vector{charge} : std::vector<Attribution>{});
  }
  const GroupMembers members({0, 1}, {});
  return VerdictDecider({"pp0.tp0", b.window(), b.schema(), EngineConfig{}, members, {}, {}})
      .Decide(d);
}

TEST_CASE("decider: a strong straggler is named where the charged cell waited on others",
          "[verdict_steps]") {
  // Regression (docs/results.md, "Session 24"): a tensor-parallel job's persistent fwd fault
  // (9 ms a step on replica 0) read HEALTHY once the frontier's baseline had absorbed it: the
  // little excess left was charged to the other replica's bwd, a tensor stage that waited on
  // its tensor group (no one was held back by it), while fwd on rank 0 stood 17 standard
  // errors above its peer. Rank 0 arrives last at dp_sync, rank 1 waits.
  VerdictDecision d;
  const Verdict v = DecideTensorPair(
      5,
      [](int, int m, int k) -> int64_t {
        if (k == 1 && m == 0) return 9 * kMs;
        return k == 2 && m == 1 ? 2 * kMs : 0;
      },
      Charge(2, {1}, 2 * kMs), &d);
  INFO(v.explanation);
  CHECK(d.kind == VerdictKind::kStrongEvidence);
  CHECK(LabelText(v) == "CLEAR");
  CHECK(v.candidate_ranks == std::vector<int32_t>{0});
  CHECK(v.candidate_stages == std::vector<int>{1});
  REQUIRE_FALSE(v.suspects.empty());
  CHECK(v.suspects[0].stage == 1);
  CHECK(v.suspects[0].rank == 0);
  CHECK(v.explanation.rfind("\"fwd\" on rank 0 takes", 0) == 0);
}

TEST_CASE("decider: a strong straggler in the tensor stage the frontier charged is named",
          "[verdict_steps]") {
  // Regression (docs/results.md, "Session 25"): a 2x2 tensor-parallel job, rank 0's bwd 7 ms
  // slow every step, read HEALTHY in steps 300-399: the little excess left after the baseline
  // absorbed the fault was charged to (bwd, rank 0) itself in steps where its replica peer
  // arrived last at dp_sync (here: a 9 ms data stall of rank 1 in the charged steps), so the
  // cell "waited on its tensor group", while bwd on rank 0 stood 20 standard errors above its
  // peer.
  VerdictDecision d;
  const Verdict v = DecideTensorPair(
      7,
      [](int i, int m, int k) -> int64_t {
        if (k == 0 && m == 1 && i % 10 == 0) return 9 * kMs;
        return k == 2 && m == 0 ? 7 * kMs : 0;
      },
      Charge(2, {0}, 2 * kMs), &d);
  INFO(v.explanation);
  CHECK(d.kind == VerdictKind::kStrongEvidence);
  CHECK(LabelText(v) == "CLEAR");
  CHECK(v.candidate_ranks == std::vector<int32_t>{0});
  CHECK(v.candidate_stages == std::vector<int>{2});
}

}  // namespace
}  // namespace stagefrontier::testing
