#include "daemon/captures/capture_policy.h"

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

// 16 ranks, 4 per node (node0..node3), at step 1000, 20 steps per second.
CaptureJobFacts Facts(int64_t newest = 1000) {
  CaptureJobFacts f;
  for (int32_t r = 0; r < 16; ++r) {
    f.ranks.push_back(r);
    f.node_of_rank[r] = "node" + std::to_string(r / 4);
  }
  f.newest_step = newest;
  f.steps_per_second = 20;
  return f;
}

Verdict Clear(int32_t rank, int64_t last = 999) {
  Verdict v;
  v.label = VerdictLabel::kClear;
  v.candidate_ranks = {rank};
  v.last_step = last;
  Suspect s;
  s.rank = rank;
  v.suspects.push_back(s);
  return v;
}

TEST_CASE("a CLEAR verdict asks the suspect and two references on other nodes, ahead of time") {
  CapturePolicy policy(CapturePolicyOptions{});
  const CaptureDecision d = policy.OnVerdict("job", Clear(5), Facts(), 0);
  REQUIRE(d.asked);
  CHECK(d.id == 1);
  CHECK(d.suspects == std::vector<int32_t>{5});
  REQUIRE(d.references.size() == 2);
  for (int32_t r : d.references) CHECK(r / 4 != 5 / 4);  // not on node1
  // 1 s of delivery at 20 steps/s: 20 steps ahead (more than the 10-step minimum).
  CHECK(d.first_step == 1021);
  CHECK(d.steps == 5);
  CHECK(d.ranks().size() == 3);
  CHECK_THAT(d.reason, Catch::Contains("CLEAR on rank 5: steps 1021..1025, references"));
}

TEST_CASE("ranks whose trainer cannot capture are neither asked nor references") {
  CapturePolicy policy(CapturePolicyOptions{});
  CaptureJobFacts f = Facts();
  // Every rank but 5, 12 and 13 is a plain C++ trainer with no capture handler.
  for (int32_t r = 0; r < 16; ++r) {
    if (r != 5 && r != 12 && r != 13) f.cannot_capture.insert(r);
  }
  CaptureDecision d = policy.OnVerdict("job", Clear(5), f, 0);
  REQUIRE(d.asked);
  CHECK(d.references == std::vector<int32_t>{12, 13});
  // The suspect itself cannot: nothing asked, and why.
  CapturePolicy other(CapturePolicyOptions{});
  d = other.OnVerdict("job", Clear(7), f, 0);
  CHECK_FALSE(d.asked);
  CHECK(d.reason ==
        "cannot capture: no capture handler in the trainer of rank 7 (stagefrontier.torch, or "
        "C/C++ callbacks)");
  CHECK(ReasonKind(d.reason) == "cannot capture");
}

TEST_CASE("skips say why: label, group-wide, unreliable, in flight, cooldown, hourly cap") {
  CapturePolicyOptions o;
  o.cooldown_windows = 3;
  o.max_per_hour = 2;
  CapturePolicy policy(o);
  Verdict healthy;
  CHECK_THAT(policy.OnVerdict("job", healthy, Facts(), 0).reason,
             Catch::Contains("HEALTHY: not captured"));
  Verdict tie;
  tie.label = VerdictLabel::kAmbiguous;
  tie.reason = AmbiguityReason::kTie;
  tie.group_wide = true;
  tie.candidate_ranks = {0, 1, 2, 3};
  CHECK(policy.OnVerdict("job", tie, Facts(), 0).reason == "group-wide: no rank-targeted capture");
  Verdict unreliable = Clear(3);
  unreliable.unreliable = {"clock_jump"};
  CHECK_THAT(policy.OnVerdict("job", unreliable, Facts(), 0).reason,
             Catch::Contains("verdict unreliable (clock_jump)"));

  const CaptureDecision first = policy.OnVerdict("job", Clear(3), Facts(), 0);
  REQUIRE(first.asked);
  CHECK(policy.OnVerdict("job", Clear(3), Facts(), kSecond).reason == "capture 1 in flight");
  policy.OnCaptureFinished("job", first.id, 2 * kSecond);
  CHECK(policy.OnVerdict("job", Clear(3), Facts(), 3 * kSecond).reason ==
        "cooldown: 2 of 3 windows since the last capture");
  // Another job is not held back by this one.
  CHECK(policy.OnVerdict("other", Clear(1), Facts(), 3 * kSecond).asked);

  const CaptureDecision second = policy.OnVerdict("job", Clear(3), Facts(), 4 * kSecond);
  REQUIRE(second.asked);  // the cooldown of 3 windows has passed
  policy.OnCaptureFinished("job", second.id, 5 * kSecond);
  for (int i = 0; i < 2; ++i) policy.OnVerdict("job", Clear(3), Facts(), 6 * kSecond);
  CHECK_THAT(policy.OnVerdict("job", Clear(3), Facts(), 7 * kSecond).reason,
             Catch::Contains("hourly cap: 2 captures in the last hour"));
  // An hour after the first two, captures resume.
  CHECK(policy.OnVerdict("job", Clear(3), Facts(), 3605 * kSecond).asked);
}

TEST_CASE("a TIE asks its candidates (capped), references among the other ranks") {
  CapturePolicyOptions o;
  o.max_suspects = 2;
  CapturePolicy policy(o);
  Verdict tie;
  tie.label = VerdictLabel::kAmbiguous;
  tie.reason = AmbiguityReason::kTie;
  tie.candidate_ranks = {4, 9, 13};
  const CaptureDecision d = policy.OnVerdict("job", tie, Facts(), 0);
  REQUIRE(d.asked);
  CHECK(d.suspects == std::vector<int32_t>{4, 9});
  CHECK_THAT(d.reason, Catch::Contains("(2 of 3 candidates)"));
  for (int32_t r : d.references) CHECK((r / 4 != 1 && r / 4 != 2));
}

TEST_CASE("references: other nodes first, then the suspects' node; none when all are suspects") {
  CaptureJobFacts f = Facts();
  CHECK(PickReferences({0, 1, 2, 3}, f, 2) == std::vector<int32_t>{7, 13});  // spread over 4..15
  CaptureJobFacts one_node;
  one_node.ranks = {0, 1, 2};
  one_node.newest_step = 10;
  one_node.node_of_rank = {{0, "a"}, {1, "a"}, {2, "a"}};
  CHECK(PickReferences({1}, one_node, 2) == std::vector<int32_t>{0, 2});
  CHECK(PickReferences({0, 1, 2}, one_node, 2).empty());
  CapturePolicy policy(CapturePolicyOptions{});
  Verdict all;
  all.label = VerdictLabel::kAmbiguous;
  all.candidate_ranks = {0, 1, 2};
  CHECK_THAT(policy.OnVerdict("job", all, one_node, 0).reason,
             Catch::Contains("no rank to compare with"));
}

TEST_CASE("a capture never reported finished is abandoned after its timeout") {
  CapturePolicyOptions o;
  o.cooldown_windows = 0;
  o.finish_timeout_seconds = 60;
  CapturePolicy policy(o);
  REQUIRE(policy.OnVerdict("job", Clear(2), Facts(1000), 0).asked);
  CHECK(policy.OnVerdict("job", Clear(2), Facts(1100), 30 * kSecond).reason ==
        "capture 1 in flight");
  CHECK(policy.OnVerdict("job", Clear(2), Facts(1700), 61 * kSecond).asked);
}

TEST_CASE("by hand: any ranks of the job, refused while a capture is in flight") {
  CapturePolicy policy(CapturePolicyOptions{});
  absl::StatusOr<CaptureDecision> d = policy.Manual("job", {7, 3, 7}, 8, Facts(), 0);
  REQUIRE(d.ok());
  CHECK(d->manual);
  CHECK(d->suspects == std::vector<int32_t>{3, 7});
  CHECK(d->steps == 8);
  CHECK(d->first_step == 1021);
  CHECK(policy.Manual("job", {1}, 5, Facts(), 0).status().code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(policy.Manual("job", {99}, 5, Facts(), 0).status().message()),
             Catch::Contains("rank 99 is not a rank of job job"));
  CHECK(policy.Manual("job", {}, 5, Facts(), 0).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(policy.Manual("job", {1}, 0, Facts(), 0).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(policy.Manual("fresh", {1}, 5, Facts(-1), 0).status().code() ==
        absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("decisions are kept per job, repeated skips folded, oldest dropped") {
  CapturePolicyOptions o;
  o.decisions_kept = 3;
  CapturePolicy policy(o);
  for (int i = 0; i < 5; ++i) policy.OnVerdict("job", Verdict{}, Facts(), i);
  std::vector<CaptureDecision> kept = policy.Decisions("job");
  REQUIRE(kept.size() == 1);  // five HEALTHY windows: one entry, the latest
  CHECK(kept[0].decided_ns == 4);
  policy.OnVerdict("job", Clear(1), Facts(), 10);
  policy.OnVerdict("job", Clear(1), Facts(), 11);  // in flight
  policy.OnVerdict("job", Verdict{}, Facts(), 12);
  kept = policy.Decisions("job");
  REQUIRE(kept.size() == 3);
  CHECK(kept[0].asked);
  CHECK(kept[1].reason == "capture 1 in flight");
  CHECK(policy.Decisions("none").empty());
}

TEST_CASE("options out of range are refused, naming the field") {
  CapturePolicyOptions o;
  CHECK(o.Validate().ok());
  o.steps = 0;
  CHECK_THAT(std::string(o.Validate().message()), Catch::Contains("steps must be in [1, 100]"));
  o = CapturePolicyOptions{};
  o.delivery_seconds = -1;
  CHECK_THAT(std::string(o.Validate().message()), Catch::Contains("delivery_seconds"));
  o = CapturePolicyOptions{};
  o.max_per_hour = 0;
  CHECK_THAT(std::string(o.Validate().message()), Catch::Contains("max_per_hour"));
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

TEST_CASE("the capture carries the verdict's stage for the report") {
  CapturePolicy policy(CapturePolicyOptions{});
  CaptureJobFacts f = Facts();
  f.stage_names = {"data", "forward", "grad_sync"};
  Verdict v = Clear(5);
  v.suspects[0].stage = 1;
  CaptureDecision d = policy.OnVerdict("job", v, f, 0);
  REQUIRE(d.asked);
  CHECK(d.stage == "forward");
  // A stage index the names do not cover leaves the stage empty (no report), not a crash.
  CapturePolicy other(CapturePolicyOptions{});
  v.suspects[0].stage = 9;
  CHECK(other.OnVerdict("job", v, f, 0).stage.empty());
}

TEST_CASE("by hand with the rank the last verdict named: that rank against the others") {
  CapturePolicy policy(CapturePolicyOptions{});
  CaptureJobFacts f = Facts();
  f.focus_rank = 3;
  f.focus_stage = "data";
  absl::StatusOr<CaptureDecision> d = policy.Manual("job", {0, 3, 7}, 5, f, 0);
  REQUIRE(d.ok());
  CHECK(d->suspects == std::vector<int32_t>{3});
  CHECK(d->references == std::vector<int32_t>{0, 7});
  CHECK(d->stage == "data");
  CHECK_THAT(d->reason, Catch::StartsWith("asked by hand: ranks 0, 3, 7, steps"));
  CHECK_THAT(d->reason, Catch::Contains("compared: rank 3's data"));
  // Without the named rank among them (or alone), nothing to compare: every rank a suspect.
  CapturePolicy p2(CapturePolicyOptions{});
  d = p2.Manual("job", {0, 7}, 5, f, 0);
  REQUIRE(d.ok());
  CHECK(d->stage.empty());
  CHECK(d->suspects == std::vector<int32_t>{0, 7});
  CapturePolicy p3(CapturePolicyOptions{});
  d = p3.Manual("job", {3}, 5, f, 0);
  REQUIRE(d.ok());
  CHECK(d->stage.empty());
}

}  // namespace
}  // namespace stagefrontier
