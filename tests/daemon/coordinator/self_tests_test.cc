// The self-test book's rules with exact inputs: request checks, the automatic lead, the stub's
// answers, and how closed windows are judged (found, found_ambiguous, missed, injecting).
#include "daemon/coordinator/self_tests.h"

#include <catch2/catch.hpp>

#include "shm/control_channel.h"
#include "shm/segment_layout_v1.h"

namespace stagefrontier {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

SelfTestJobFacts Facts() {
  SelfTestJobFacts f;
  f.job = "run";
  f.world_size = 4;
  f.stages = {"data", "forward", "sync"};
  f.newest_step = 100;
  f.step_ns = 10'000'000;  // 10 ms: 3 s of lead is 300 steps
  return f;
}

v1::SelfTestCommand Command(int32_t rank, const std::string& stage, uint32_t lead = 0) {
  v1::SelfTestCommand c;
  c.set_rank(rank);
  c.set_stage(stage);
  c.set_delay_ms(40);
  c.set_steps(10);
  c.set_lead_steps(lead);
  return c;
}

v1::VerdictEvent Window(int64_t first, int64_t last, const std::string& label,
                        const std::string& stage = "", int32_t rank = -1) {
  v1::VerdictEvent ev;
  v1::Verdict* v = ev.mutable_verdict();
  v->set_first_step(first);
  v->set_last_step(last);
  v->set_steps(static_cast<int32_t>(last - first + 1));
  v->set_label(label);
  if (rank >= 0) {
    v1::Suspect* s = v->add_suspects();
    s->set_stage(stage);
    s->set_rank(rank);
    v->set_rank_shift_ns(8'000'000);  // 40 ms on 10 of 50 steps
    v->set_rank_z(7.5);
  }
  return ev;
}

v1::SlotHealth Answer(int32_t rank, int64_t first, uint32_t state, uint32_t done = 0) {
  v1::SlotHealth h;
  h.set_rank(rank);
  h.set_selftest_first_step(first);
  h.set_selftest_state(state);
  h.set_selftest_steps_done(done);
  return h;
}

// Limits that let tests of the other rules run several self-tests of one job at once.
SelfTestLimits Permissive() {
  SelfTestLimits l;
  l.max_running_per_job = 100;
  l.max_running = 100;
  return l;
}

v1::SelfTestReport Only(const SelfTestBook& book, const std::vector<v1::VerdictEvent>& windows,
                        int64_t now_ns = 0) {
  v1::GetSelfTestsReply r;
  REQUIRE(book.Report("run", 0, windows, now_ns, &r).ok());
  REQUIRE(r.tests_size() == 1);
  return r.tests(0);
}

TEST_CASE("a request is checked, placed ahead of the job, and sent to its rank") {
  SelfTestBook book(Permissive());
  auto req = book.Start(Facts(), Command(2, "forward"), 7, 0);
  REQUIRE(req.ok());
  CHECK(req->rank() == 2);
  CHECK(req->job() == "run");
  CHECK(req->selftest_stage() == 1);
  CHECK(req->selftest_delay_us() == 40'000);
  CHECK(req->selftest_first_step() == 400);  // 100 + 3 s / 10 ms
  CHECK(req->selftest_last_step() == 409);
  CHECK(req->trace_last_step() < req->trace_first_step());
  auto explicit_lead = book.Start(Facts(), Command(1, "data", 20), 8, 0);
  REQUIRE(explicit_lead.ok());
  CHECK(explicit_lead->selftest_first_step() == 120);

  auto bad_rank = book.Start(Facts(), Command(4, "data"), 9, 0);
  CHECK(bad_rank.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad_rank.status().message()), Catch::Contains("world of 4 ranks"));
  auto bad_stage = book.Start(Facts(), Command(0, "loss"), 9, 0);
  CHECK_THAT(std::string(bad_stage.status().message()),
             Catch::Contains("its stages are data, forward, sync"));
  v1::SelfTestCommand too_long = Command(0, "data");
  too_long.set_delay_ms(1001);
  CHECK(book.Start(Facts(), too_long, 9, 0).status().code() == absl::StatusCode::kInvalidArgument);
  too_long.set_delay_ms(10);
  too_long.set_steps(0);
  CHECK(book.Start(Facts(), too_long, 9, 0).status().code() == absl::StatusCode::kInvalidArgument);
  SelfTestJobFacts fresh = Facts();
  fresh.newest_step = -1;
  CHECK(book.Start(fresh, Command(0, "data"), 9, 0).status().code() ==
        absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("without the stub's answer: requested, then unanswered; refusals say why") {
  SelfTestBook book;
  REQUIRE(book.Start(Facts(), Command(2, "data", 10), 1, 0).ok());
  CHECK(Only(book, {}, kSecond).state() == "requested");
  const v1::SelfTestReport late = Only(book, {}, 31 * kSecond);
  CHECK(late.state() == "unanswered");
  CHECK_THAT(late.detail(), Catch::Contains("predates self-tests"));
  // An answer for another request (another first step) or another rank is not this one's.
  book.OnStubAnswer("run", Answer(2, 999, shm::v1::kSelfTestAccepted));
  book.OnStubAnswer("run", Answer(3, 110, shm::v1::kSelfTestAccepted));
  CHECK(Only(book, {}, kSecond).state() == "requested");
  book.OnStubAnswer("run", Answer(2, 110, shm::v1::kSelfTestNotAllowed));
  const v1::SelfTestReport refused = Only(book, {});
  CHECK(refused.state() == "refused");
  CHECK_THAT(refused.detail(), Catch::Contains("STAGEFRONTIER_ALLOW_SELFTEST=1"));
}

TEST_CASE("closed windows decide: found with the measured delay, ambiguous, missed") {
  SelfTestBook book;
  REQUIRE(book.Start(Facts(), Command(2, "data", 10), 1, 0).ok());  // steps 110..119
  book.OnStubAnswer("run", Answer(2, 110, shm::v1::kSelfTestAccepted, 4));
  book.OnMarkedSteps("run", 2, 10);

  SECTION("a window still open: injecting") {
    const v1::SelfTestReport r = Only(book, {Window(51, 100, "HEALTHY")});
    CHECK(r.state() == "injecting");
    CHECK(r.steps_done() == 4);
    CHECK(r.steps_marked() == 10);
  }
  SECTION("CLEAR on the stage and rank: found, and the shift scaled to the delayed steps") {
    const v1::SelfTestReport r =
        Only(book, {Window(51, 100, "HEALTHY"), Window(101, 150, "CLEAR", "data", 2)});
    CHECK(r.state() == "found");
    CHECK(r.measured_delay_ns() == 40'000'000);  // 8 ms x 50 steps / 10 delayed
    CHECK(r.measured_z() == 7.5);
    REQUIRE(r.windows_size() == 1);
    CHECK(r.windows(0) == "CLEAR data rank 2 (steps 101..150)");
  }
  SECTION("AMBIGUOUS listing the rank and stage: found_ambiguous; group-wide is not") {
    v1::VerdictEvent tie = Window(101, 150, "AMBIGUOUS", "data", 1);
    tie.mutable_verdict()->set_reason("TIE");
    tie.mutable_verdict()->add_candidate_ranks(1);
    tie.mutable_verdict()->add_candidate_ranks(2);
    tie.mutable_verdict()->add_candidate_stages("data");
    CHECK(Only(book, {tie}).state() == "found_ambiguous");
    tie.mutable_verdict()->set_group_wide(true);
    CHECK(Only(book, {tie}).state() == "missed");
  }
  SECTION("the wrong rank or stage, or HEALTHY: missed once the windows closed") {
    CHECK(Only(book, {Window(101, 150, "CLEAR", "data", 3)}).state() == "missed");
    CHECK(Only(book, {Window(101, 150, "CLEAR", "forward", 2)}).state() == "missed");
    CHECK(Only(book, {Window(101, 115, "HEALTHY"), Window(116, 130, "HEALTHY")}).state() ==
          "missed");
  }
  SECTION("named before the delay ended: injecting until the window holding it closes") {
    // Regression: the answer came with the first naming window, before every marked record
    // had arrived (e2e_selftest_test saw steps_marked < 10 when the delay straddled windows).
    const v1::SelfTestReport early = Only(book, {Window(101, 114, "CLEAR", "data", 2)});
    CHECK(early.state() == "injecting");
    CHECK_THAT(early.detail(), Catch::Contains("named in CLEAR data rank 2 (steps 101..114)"));
    CHECK_THAT(early.detail(), Catch::Contains("step 119"));
    CHECK(Only(book, {Window(101, 114, "CLEAR", "data", 2), Window(115, 128, "HEALTHY")}).state() ==
          "found");
  }
  SECTION("a delay split over two windows is found in either") {
    const v1::SelfTestReport r =
        Only(book, {Window(101, 114, "HEALTHY"), Window(115, 128, "CLEAR", "data", 2)});
    CHECK(r.state() == "found");
    CHECK(r.windows_size() == 2);
  }
}

TEST_CASE("reports by id, unknown ids, cancelled requests, the cap per job") {
  SelfTestLimits limits = Permissive();
  limits.kept_per_job = 2;
  SelfTestBook book(limits);
  REQUIRE(book.Start(Facts(), Command(0, "data", 10), 1, 0).ok());
  REQUIRE(book.Start(Facts(), Command(1, "data", 10), 2, 0).ok());
  REQUIRE(book.Start(Facts(), Command(2, "data", 10), 3, 0).ok());
  v1::GetSelfTestsReply r;
  CHECK(book.Report("run", 1, {}, 0, &r).code() == absl::StatusCode::kNotFound);  // dropped
  r.Clear();
  REQUIRE(book.Report("run", 3, {}, 0, &r).ok());
  CHECK(r.tests(0).rank() == 2);
  book.Forget("run", 3);
  r.Clear();
  CHECK(book.Report("run", 3, {}, 0, &r).code() == absl::StatusCode::kNotFound);
  r.Clear();
  REQUIRE(book.Report("other", 0, {}, 0, &r).ok());
  CHECK(r.tests().empty());
}

// Regression (issue 28, attack 6): any number of self-tests ran at once, several on one rank,
// and kept running after sfctl went away: four slowed a job from 100 to 1 step/s for 17 min.
TEST_CASE("one self-test per job at a time, a few per coordinator, a budget per hour") {
  SelfTestLimits limits;
  limits.max_running = 2;
  limits.max_steps_per_hour = 25;
  SelfTestBook book(limits);
  REQUIRE(book.Start(Facts(), Command(0, "data", 10), 1, 0).ok());  // steps 110..119
  auto second = book.Start(Facts(), Command(1, "data", 10), 2, 0);
  CHECK(second.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(second.status().message()),
             Catch::Contains("1 self-test running already") && Catch::Contains("--cancel"));
  SelfTestJobFacts other = Facts();
  other.job = "other";
  REQUIRE(book.Start(other, Command(0, "data", 10), 3, 0).ok());
  SelfTestJobFacts third = Facts();
  third.job = "third";
  auto over = book.Start(third, Command(0, "data", 10), 4, 0);
  CHECK(over.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(over.status().message()), Catch::Contains("2 self-tests are running"));
  SelfTestLoad load = book.Load("run", 100, 0);
  CHECK(load.running == 1);
  CHECK(load.running_all == 2);
  CHECK(load.steps_last_hour == 10);
  // Once the job is past the delayed steps, the next may start; the hourly budget still holds.
  SelfTestJobFacts later = Facts();
  later.newest_step = 120;
  REQUIRE(book.Start(later, Command(1, "data", 10), 5, kSecond).ok());  // 20 of 25
  later.newest_step = 140;
  auto budget = book.Start(later, Command(2, "data", 10), 6, 2 * kSecond);
  CHECK(budget.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(budget.status().message()), Catch::Contains("budget of 25 an hour"));
  // An hour later the budget is back.
  CHECK(book.Start(later, Command(2, "data", 10), 7, 3700 * kSecond).ok());
}

TEST_CASE("a self-test is cancelled by hand, or when nobody asks for its result") {
  SelfTestBook book;
  REQUIRE(book.Start(Facts(), Command(2, "data", 10), 1, 0).ok());
  auto stop = book.Cancel("run", 1, 105, "cancelled by sfctl selftest --cancel");
  REQUIRE(stop.ok());
  CHECK(stop->rank() == 2);
  CHECK(stop->selftest_delay_us() == 0);  // the stub stops delaying
  CHECK(stop->sets() == shm::kControlSetsSelfTest);
  const v1::SelfTestReport r = Only(book, {});
  CHECK(r.state() == "cancelled");
  CHECK(book.Cancel("run", 1, 105, "again").status().code() ==
        absl::StatusCode::kFailedPrecondition);
  CHECK(book.Cancel("run", 9, 105, "x").status().code() == absl::StatusCode::kNotFound);
  // The job is free for the next one at once; the hour's budget counts only the steps it
  // delayed before it was cancelled (steps 110..105: none).
  CHECK(book.Load("run", 105, 0).steps_last_hour == 0);
  REQUIRE(book.Start(Facts(), Command(1, "data", 10), 2, 0).ok());
  // Its client polls for a while, then goes away: the lease runs out 30 s after the last poll.
  auto newest = [](const std::string&) { return int64_t{105}; };
  book.Renew("run", 2, 20 * kSecond);
  CHECK(book.ExpireLeases(40 * kSecond, newest).empty());
  const std::vector<v1::ControlRequest> expired = book.ExpireLeases(51 * kSecond, newest);
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].rank() == 1);
  CHECK(expired[0].selftest_delay_us() == 0);
  v1::GetSelfTestsReply all;
  REQUIRE(book.Report("run", 2, {}, 51 * kSecond, &all).ok());
  CHECK(all.tests(0).state() == "cancelled");
  CHECK_THAT(all.tests(0).detail(), Catch::Contains("the client that started it went away"));
  CHECK(book.ExpireLeases(60 * kSecond, newest).empty());  // once
  // A self-test already past its steps is not cancelled by its lease.
  REQUIRE(book.Start(Facts(), Command(0, "data", 10), 3, 60 * kSecond).ok());
  CHECK(book.ExpireLeases(200 * kSecond, [](const std::string&) { return int64_t{500}; }).empty());
}

}  // namespace
}  // namespace stagefrontier
