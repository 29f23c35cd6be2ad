// The step aligner: complete steps close at once and in order; duplicates and late records
// are recognized; deadlines close partial steps and mark the absent ranks missing, after
// which they are no longer waited for; a missing rank that reports again comes back.
#include "daemon/coordinator/step_aligner.h"

#include <catch2/catch.hpp>

#include "shm/segment_layout_v1.h"

namespace stagefrontier {
namespace {

const int64_t kD[] = {1'000, 2'000};

TEST_CASE("a step past its deadline stays open while its records still come in") {
  // Deadline 1,000: quiet after 1,000 / 5 = 200 without a record of the step; at most 2,000.
  StepAligner a(4, 2, {.deadline_ns = 1'000, .max_pending_steps = 100});
  CHECK(a.Add(0, 0, kD, 0, 0) == AlignOutcome::kAccepted);
  CHECK(a.Add(1, 0, kD, 0, 900) == AlignOutcome::kAccepted);  // a node that batches later
  CHECK(!a.NextClosable(1'000).has_value());                  // its deadline, but a record 100 ago
  CHECK(a.Add(2, 0, kD, 0, 1'050) == AlignOutcome::kAccepted);  // not late: still open
  CHECK(!a.NextClosable(1'249).has_value());
  REQUIRE(a.NextClosable(1'250).value() == 0);  // 200 quiet
  CHECK(a.Close(0).ranks.size() == 3);
  CHECK(a.Add(3, 0, kD, 0, 1'300) == AlignOutcome::kLate);
  // Records that keep coming (one of 64 ranks every 100): closed twice the deadline after the
  // first.
  StepAligner many(64, 2, {.deadline_ns = 1'000, .max_pending_steps = 100});
  for (int32_t r = 0; r <= 20; ++r) many.Add(r, 0, kD, 0, 100 * r);
  CHECK(!many.NextClosable(1'999).has_value());
  CHECK(many.NextClosable(2'000).value() == 0);
  // A step whose records all came at once closes at its deadline, as before.
  StepAligner b(3, 2, {.deadline_ns = 1'000, .max_pending_steps = 100});
  for (int r : {0, 1}) b.Add(r, 0, kD, 0, 0);
  CHECK(!b.NextClosable(999).has_value());
  CHECK(b.NextClosable(1'000).value() == 0);
}

TEST_CASE("complete steps close in order with rebuilt boundaries") {
  StepAligner a(3, 2, {.deadline_ns = 1'000, .max_pending_steps = 100});
  for (int r : {2, 0}) CHECK(a.Add(r, 0, kD, 0, 0) == AlignOutcome::kAccepted);
  CHECK(!a.NextClosable(10).has_value());
  // Step 1 complete, step 0 not: nothing closes out of order.
  for (int r : {0, 1, 2}) CHECK(a.Add(r, 1, kD, 0, 5) == AlignOutcome::kAccepted);
  CHECK(!a.NextClosable(10).has_value());
  CHECK(a.Add(0, 0, kD, 0, 6) == AlignOutcome::kDuplicate);  // held already
  REQUIRE(a.NextClosable(1'000).value() == 0);               // deadline
  StepInput in = a.Close(0);
  CHECK(in.step == 0);
  REQUIRE(in.ranks.size() == 2);
  CHECK(in.ranks[0].rank == 2);
  CHECK(in.ranks[0].boundaries_ns == std::vector<int64_t>{0, 1'000, 3'000});
  // Rank 1 already reported step 1: behind on step 0, not gone.
  CHECK(a.rank_state(1) == RankState::kReporting);
  CHECK(a.missing_count() == 0);
  REQUIRE(a.NextClosable(1'001).value() == 1);
  CHECK(a.Close(1).ranks.size() == 3);
}

TEST_CASE("duplicates, late records, and missing ranks no longer waited for") {
  StepAligner a(2, 2, {.deadline_ns = 100, .max_pending_steps = 100});
  CHECK(a.Add(0, 5, kD, 0, 0) == AlignOutcome::kAccepted);
  CHECK(a.Add(0, 5, kD, 0, 1) == AlignOutcome::kDuplicate);
  REQUIRE(a.NextClosable(100).value() == 5);
  CHECK(a.Close(5).ranks.size() == 1);
  CHECK(a.rank_state(1) == RankState::kMissing);
  CHECK(a.Add(1, 5, kD, 0, 101) == AlignOutcome::kLate);
  CHECK(a.Add(1, 4, kD, 0, 101) == AlignOutcome::kLate);
  // Rank 1 is missing: step 6 closes as soon as rank 0 reports it.
  CHECK(a.Add(0, 6, kD, 0, 102) == AlignOutcome::kAccepted);
  CHECK(a.NextClosable(102).value() == 6);
  a.Close(6);
  // Rank 1 comes back: step 7 waits for it again.
  CHECK(a.Add(1, 7, kD, 0, 103) == AlignOutcome::kAccepted);
  CHECK(a.rank_state(1) == RankState::kReporting);
  CHECK(a.Add(0, 7, kD, 0, 103) == AlignOutcome::kAccepted);
  CHECK(a.NextClosable(103).value() == 7);
  CHECK(a.last_closed() == 6);
}

TEST_CASE("too many pending steps close the oldest") {
  StepAligner a(3, 2, {.deadline_ns = 1'000'000, .max_pending_steps = 3});
  for (int s = 0; s < 3; ++s) a.Add(0, s, kD, 0, 0);
  a.Add(1, 0, kD, 0, 0);
  CHECK(!a.NextClosable(0).has_value());
  a.Add(0, 3, kD, 0, 0);
  CHECK(a.NextClosable(0).value() == 0);
  a.Close(0);
  CHECK(a.rank_state(2) == RankState::kMissing);
  CHECK(a.rank_state(0) == RankState::kReporting);
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

// Regression (hostile input): after one record with a step number far ahead, every later
// record of that rank was refused (as a duplicate of the bogus step), and the rank went
// missing for the rest of the job.
TEST_CASE("a corrupt step number does not ruin the rest of a rank's stream") {
  StepAligner a(4, 2, {.deadline_ns = 100, .max_pending_steps = 100, .max_step_lead = 1000});
  int64_t now = 0;
  auto step_all = [&](int64_t s) {
    for (int r = 0; r < 4; ++r) CHECK(a.Add(r, s, kD, 0, now) == AlignOutcome::kAccepted);
    REQUIRE(a.NextClosable(now).value() == s);
    CHECK(a.Close(s).ranks.size() == 4);
  };
  for (int64_t s = 0; s < 10; ++s) step_all(s);
  // Far beyond where the job is: refused, not kept.
  CHECK(a.Add(2, int64_t{1} << 39, kD, 0, now) == AlignOutcome::kFarAhead);
  CHECK(a.last_step(2) == 9);
  // Within the lead: kept, but it must not make rank 2's next real steps "duplicates".
  CHECK(a.Add(2, 500, kD, 0, now) == AlignOutcome::kAccepted);
  for (int64_t s = 10; s < 20; ++s) {
    now += 50;
    step_all(s);
  }
  CHECK(a.rank_state(2) == RankState::kReporting);
  // The bogus step 500 stays open ahead of the job; once it is more than a deadline older
  // than the oldest open step, it is an orphan and dropped.
  CHECK(a.newest_step() == 500);
  now += 200;
  CHECK(a.Add(0, 20, kD, 0, now) == AlignOutcome::kAccepted);
  REQUIRE(a.Orphans() == std::vector<int64_t>{500});
  CHECK(a.Drop(500) == 1);
  CHECK(a.newest_step() == 20);
  CHECK(a.last_step(2) == 19);
}

TEST_CASE("a job-wide jump in step numbers is followed") {
  StepAligner a(2, 2, {.deadline_ns = 100, .max_pending_steps = 100, .max_step_lead = 1000});
  for (int r = 0; r < 2; ++r) CHECK(a.Add(r, 0, kD, 0, 0) == AlignOutcome::kAccepted);
  a.Close(a.NextClosable(0).value());
  // Both ranks restart from a checkpoint numbered 1,000,000: the first record is refused (one
  // rank alone cannot move where the job is), then the job has moved.
  CHECK(a.Add(0, 1'000'000, kD, 0, 1) == AlignOutcome::kFarAhead);
  CHECK(a.Add(1, 1'000'000, kD, 0, 1) == AlignOutcome::kAccepted);
  CHECK(a.Add(0, 1'000'001, kD, 0, 2) == AlignOutcome::kAccepted);
  CHECK(a.Add(1, 1'000'001, kD, 0, 2) == AlignOutcome::kAccepted);
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

// A step opened after a close takes the closed step's buffers: nothing of the old step shows.
TEST_CASE("a step opened on a closed step's buffers starts empty") {
  StepAligner a(3, 2, {.deadline_ns = 1'000, .max_pending_steps = 100});
  const int64_t other[] = {7, 9};
  for (int r : {2, 0, 1}) {
    CHECK(a.Add(r, 0, kD, shm::v1::kRecordTraceCaptured, 0) == AlignOutcome::kAccepted);
  }
  REQUIRE(a.NextClosable(0).value() == 0);
  CHECK(a.Close(0).ranks.size() == 3);
  CHECK(a.Add(1, 1, other, 0, 500) == AlignOutcome::kAccepted);
  CHECK(a.Add(1, 1, other, 0, 501) == AlignOutcome::kDuplicate);  // its own bit only
  CHECK(a.oldest_first_arrival_ns() == 500);
  CHECK(!a.NextClosable(1'499).has_value());  // not complete: 1 of 3
  REQUIRE(a.NextClosable(1'500).value() == 1);
  const StepInput in = a.Close(1);
  CHECK_FALSE(in.captured);
  REQUIRE(in.ranks.size() == 1);
  CHECK(in.ranks[0].rank == 1);
  CHECK(in.ranks[0].boundaries_ns == std::vector<int64_t>{0, 7, 16});
  CHECK(a.rank_state(0) == RankState::kMissing);
  CHECK(a.rank_state(2) == RankState::kMissing);
}

// A sidecar's batch opens several steps at once: each opens on a closed step's buffers (up to
// kSpareSteps of them), and Close refills inputs handed back by Recycle. Nothing of an earlier
// step may show through: fewer ranks, no probe spans, not captured, other durations.
TEST_CASE("steps opened on recycled buffers and inputs hold only their own records") {
  StepAligner a(3, 2, {.deadline_ns = 1'000, .max_pending_steps = 100});
  const int64_t other[] = {7, 9};
  std::vector<StepInput> used;
  for (int64_t s = 0; s < 10; ++s) {  // 10 steps open at once, all ranks, with probe spans
    for (int r : {2, 0, 1}) {
      std::vector<ProbeSpan> probe(2);
      probe[0].call_ns = 1'500;
      CHECK(a.Add(r, s, kD, shm::v1::kRecordTraceCaptured, 0, std::move(probe)) ==
            AlignOutcome::kAccepted);
    }
  }
  for (int64_t s = 0; s < 10; ++s) {
    REQUIRE(a.NextClosable(0).value() == s);
    used.push_back(a.Close(s));
    CHECK(used.back().ranks.size() == 3);
    CHECK(used.back().ranks[0].probe.size() == 2);
    CHECK(used.back().ranks[0].probe[0].stage == 1);  // called at 1,500: in the second stage
  }
  for (StepInput& in : used) a.Recycle(std::move(in));
  for (int64_t s = 10; s < 20; ++s) {  // one rank a step now, another each time, no spans
    CHECK(a.Add(static_cast<int32_t>(s % 3), s, other, 0, 100) == AlignOutcome::kAccepted);
  }
  for (int64_t s = 10; s < 20; ++s) {
    REQUIRE(a.NextClosable(2'000).value() == s);  // by deadline
    const StepInput in = a.Close(s);
    CHECK(in.step == s);
    CHECK_FALSE(in.captured);
    REQUIRE(in.ranks.size() == 1);
    CHECK(in.ranks[0].rank == s % 3);
    CHECK(in.ranks[0].boundaries_ns == std::vector<int64_t>{0, 7, 16});
    CHECK(in.ranks[0].probe.empty());
    a.Recycle(StepInput(in));
  }
}

TEST_CASE("Close fills the input Recycle handed back; a step not pending closes empty") {
  StepAligner a(3, 2, {.deadline_ns = 1'000, .max_pending_steps = 100});
  for (int r : {0, 1, 2}) CHECK(a.Add(r, 0, kD, 0, 0) == AlignOutcome::kAccepted);
  StepInput first = a.Close(0);
  REQUIRE(first.ranks.size() == 3);
  const RankStep* storage = first.ranks.data();
  const int64_t* boundaries = first.ranks[0].boundaries_ns.data();
  a.Recycle(std::move(first));
  for (int r : {1, 2}) CHECK(a.Add(r, 1, kD, 0, 0) == AlignOutcome::kAccepted);
  const StepInput second = a.Close(1);
  REQUIRE(second.ranks.size() == 2);
  CHECK(second.ranks.data() == storage);  // the same buffers, refilled
  CHECK(second.ranks[0].boundaries_ns.data() == boundaries);
  CHECK(second.ranks[0].rank == 1);
  // A recycled input that was captured and held 4 ranks gives a not-pending step nothing.
  StepAligner b(3, 2, {.deadline_ns = 1'000, .max_pending_steps = 100});
  b.Recycle(StepInput{.step = 3, .ranks = std::vector<RankStep>(4), .captured = true});
  const StepInput none = b.Close(99);
  CHECK(none.step == 99);
  CHECK_FALSE(none.captured);
  CHECK(none.ranks.empty());
}

TEST_CASE("a step is captured when any rank's record was inside a profiler capture") {
  StepAligner a(2, 2, {.deadline_ns = 1'000, .max_pending_steps = 100});
  CHECK(a.Add(0, 0, kD, 0, 0) == AlignOutcome::kAccepted);
  CHECK(a.Add(1, 0, kD, shm::v1::kRecordSelfTestDelay, 0) == AlignOutcome::kAccepted);
  CHECK(a.Add(0, 1, kD, 0, 0) == AlignOutcome::kAccepted);
  CHECK(a.Add(1, 1, kD, shm::v1::kRecordTraceCaptured, 0) == AlignOutcome::kAccepted);
  CHECK_FALSE(a.Close(0).captured);  // other flags do not count
  CHECK(a.Close(1).captured);
}

// Regression (hostile input): every far-ahead record copied all ranks' claims and took their
// median, under the job's lock: a batch of 65,536 such records at 131,072 ranks was minutes
// of CPU. A run of them from one rank now costs one median; a rank that may move it still
// recomputes it.
TEST_CASE("a run of far-ahead records costs one median, and the median still follows") {
  StepAligner a(64, 2, {.deadline_ns = 100, .max_pending_steps = 100, .max_step_lead = 1000});
  for (int r = 0; r < 64; ++r) CHECK(a.Add(r, 0, kD, 0, 0) == AlignOutcome::kAccepted);
  a.Close(a.NextClosable(0).value());
  const int64_t before = a.reference_computations();
  for (int64_t s = 0; s < 10'000; ++s) {
    CHECK(a.Add(3, 1'000'000 + s, kD, 0, 1) == AlignOutcome::kFarAhead);
  }
  CHECK(a.reference_computations() - before <= 1);
  // Half the ranks and one more jump too: the median moves, and the job follows.
  for (int r = 0; r < 33; ++r) a.Add(r == 3 ? 63 : r, 2'000'000, kD, 0, 2);
  CHECK(a.Add(40, 2'000'000, kD, 0, 2) == AlignOutcome::kAccepted);
}

// Regression (hostile input): within one message nothing closes, so one rank's batch of
// 100,000 new steps opened 100,000 steps, each with a world-sized bitmap.
TEST_CASE("a rank cannot open more steps than twice the pending bound at once") {
  StepAligner a(4, 2, {.deadline_ns = 100, .max_pending_steps = 8, .max_step_lead = 100'000});
  int accepted = 0;
  int refused = 0;
  for (int64_t s = 0; s < 1'000; ++s) {
    (a.Add(1, s, kD, 0, 0) == AlignOutcome::kAccepted ? accepted : refused) += 1;
  }
  CHECK(accepted == 2 * 8 + 64);
  CHECK(refused == 1'000 - accepted);
  CHECK(a.pending_steps() == static_cast<size_t>(accepted));
}

}  // namespace
}  // namespace stagefrontier
