#include "daemon/captures/capture_trigger.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "shm/control_channel.h"
#include "tests/daemon/events/fake_control_request_sender.h"

namespace stagefrontier {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

ClosedJobWindow Window(const Verdict& v, int64_t newest, int64_t now_ns) {
  ClosedJobWindow w;
  w.job = "run";
  w.verdict = &v;
  w.rank_nodes = {"a", "a", "b", "b"};
  w.newest_step = newest;
  w.job_control.set_job("run");
  w.job_control.set_sample_every(2);  // job-wide settings travel with every request
  w.now_ns = now_ns;
  return w;
}

Verdict Clear(int32_t rank) {
  Verdict v;
  v.label = VerdictLabel::kClear;
  v.candidate_ranks = {rank};
  return v;
}

TEST_CASE("a CLEAR window sends the trace window to the suspect and its references") {
  std::vector<std::string> lines;
  CapturePolicyOptions o;
  o.references = 1;
  o.delivery_seconds = 5;  // a lead longer than the 10-step minimum (the default is 1 s)
  CaptureTrigger trigger(o, [&](const std::string& l) { lines.push_back(l); });
  testing::FakeControlRequestSender sidecars;
  sidecars.Serve("run", {0, 1, 2, 3});

  const Verdict healthy;
  trigger.OnJobWindow(Window(healthy, 100, 0));  // learns the pace: 100 steps in 10 s
  const Verdict clear = Clear(1);
  trigger.OnJobWindow(Window(clear, 200, 10 * kSecond));
  CHECK(trigger.Flush(&sidecars) == 2);
  const std::vector<v1::ControlRequest> node_a = sidecars.SentTo({0, 1});
  const std::vector<v1::ControlRequest> node_b = sidecars.SentTo({2, 3});
  REQUIRE(node_a.size() == 1);
  REQUIRE(node_b.size() == 1);
  const v1::ControlRequest& suspect = node_a[0];
  const v1::ControlRequest& reference = node_b[0];
  CHECK(suspect.rank() == 1);
  CHECK(reference.rank() / 2 == 1);  // on node b, away from the suspect's node
  // 10 steps/s x 5 s of delivery = 50 steps ahead.
  CHECK(suspect.trace_first_step() == 251);
  CHECK(suspect.trace_last_step() == 255);
  CHECK(reference.trace_first_step() == 251);
  CHECK(suspect.sample_every() == 2);
  CHECK(suspect.request_id() == reference.request_id());
  CHECK(trigger.counters().asked == 1);
  CHECK(trigger.counters().skipped == 1);
  CHECK(trigger.counters().requests_sent == 2);
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[0],
             Catch::Contains("no capture for job run (window ending at step 0): HEALTHY"));
  CHECK_THAT(lines[1], Catch::Contains("capture 1 of job run: CLEAR on rank 1: steps 251..255"));
  CHECK(trigger.Flush(&sidecars) == 0);  // nothing left

  // In flight until the job is past its steps (and the lead again); then, after the cooldown,
  // the next one.
  trigger.OnJobWindow(Window(clear, 300, 20 * kSecond));
  CHECK(trigger.Decisions("run").back().reason == "capture 1 in flight");
  // Past step 307 (251 + 5 steps + the 51-step lead): finished; the third window since the
  // capture ends the cooldown of 3.
  trigger.OnJobWindow(Window(clear, 400, 30 * kSecond));
  CHECK_THAT(trigger.Decisions("run").back().reason, Catch::Contains("cooldown: 2 of 3"));
  trigger.OnJobWindow(Window(clear, 500, 40 * kSecond));
  CHECK(trigger.Decisions("run").back().asked);
}

v1::SlotHealth Answer(int32_t rank, int64_t first, uint32_t state, uint32_t failure = 0,
                      uint64_t bytes = 0) {
  v1::SlotHealth h;
  h.set_job("run");
  h.set_rank(rank);
  h.set_capture_first_step(first);
  h.set_capture_state(state);
  h.set_capture_failure(failure);
  h.set_capture_bytes(bytes);
  return h;
}

// A coordinator serving job after job: what the trigger keeps per job goes with the job.
TEST_CASE("a job that left memory leaves no decisions or pace behind") {
  CapturePolicyOptions o;
  CaptureTrigger trigger(o);
  testing::FakeControlRequestSender sidecars;
  sidecars.Serve("run", {0, 1, 2, 3});
  const Verdict healthy;
  trigger.OnJobWindow(Window(healthy, 100, 0));
  const Verdict clear = Clear(1);
  trigger.OnJobWindow(Window(clear, 200, 10 * kSecond));
  trigger.Flush(&sidecars);
  REQUIRE_FALSE(trigger.Decisions("run").empty());
  trigger.OnJobRetired("run");
  CHECK(trigger.Decisions("run").empty());
}

TEST_CASE("the ranks' answers end a capture before its steps have passed, and are listed") {
  std::vector<std::string> lines;
  CapturePolicyOptions o;
  o.references = 1;
  o.cooldown_windows = 0;
  CaptureTrigger trigger(o, [&](const std::string& l) { lines.push_back(l); });
  const Verdict healthy;
  trigger.OnJobWindow(Window(healthy, 100, 0));
  const Verdict clear = Clear(1);
  trigger.OnJobWindow(Window(clear, 200, 10 * kSecond));
  const CaptureDecision d = trigger.Decisions("run").back();
  REQUIRE(d.asked);
  REQUIRE(d.ranks().size() == 2);
  const int32_t reference = d.references[0];
  // Answers to no capture held, or from a rank not asked, are ignored.
  trigger.OnCaptureAnswer("run", Answer(1, d.first_step + 1, shm::v1::kCaptureDone));
  REQUIRE(reference >= 2);  // on node b: rank 0 was not asked
  trigger.OnCaptureAnswer("run", Answer(0, d.first_step, shm::v1::kCaptureDone));
  trigger.OnCaptureAnswer("other", Answer(1, d.first_step, shm::v1::kCaptureDone));
  std::vector<RankCaptureAnswer> a = trigger.Answers("run", d);
  REQUIRE(a.size() == 2);
  CHECK(a[0].rank == 1);
  CHECK(a[0].state == 0);
  CHECK(a[1].state == 0);
  // The suspect is done, the reference still running: in flight at the next window.
  trigger.OnCaptureAnswer("run", Answer(1, d.first_step, shm::v1::kCaptureRunning));
  trigger.OnCaptureAnswer("run", Answer(1, d.first_step, shm::v1::kCaptureDone, 0, 777));
  trigger.OnCaptureAnswer("run", Answer(1, d.first_step, shm::v1::kCaptureDone, 0, 777));
  trigger.OnCaptureAnswer("run", Answer(reference, d.first_step, shm::v1::kCaptureRunning));
  trigger.OnJobWindow(Window(clear, 210, 11 * kSecond));
  CHECK(trigger.Decisions("run").back().reason == "capture 1 in flight");
  // The reference fails (its profiler was busy): every rank has answered, so the next window
  // may ask again, long before step 307.
  trigger.OnCaptureAnswer("run", Answer(reference, d.first_step, shm::v1::kCaptureFailed,
                                        shm::v1::kCaptureProfilerBusy));
  trigger.OnJobWindow(Window(clear, 220, 12 * kSecond));
  CHECK(trigger.Decisions("run").back().asked);
  CHECK(trigger.Decisions("run").back().id == 2);
  a = trigger.Answers("run", d);
  CHECK(a[0] == RankCaptureAnswer{1, shm::v1::kCaptureDone, 0, 777, ""});
  CHECK(a[1].state == shm::v1::kCaptureFailed);
  CHECK(a[1].failure == shm::v1::kCaptureProfilerBusy);
  CHECK(trigger.counters().ranks_done == 1);  // repeats are not counted again
  CHECK(trigger.counters().ranks_failed == 1);
  testing::FakeControlRequestSender sidecars;  // none serves a rank
  trigger.Flush(&sidecars);                    // the log lines go out with the requests
  CHECK(std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
          return l.find("rank 2 failed (busy)") != std::string::npos ||
                 l.find("rank 3 failed (busy)") != std::string::npos;
        }) == 1);
}

TEST_CASE("ids go on from a seed; each capture asked is handed over once, at Flush") {
  CaptureTrigger trigger(CapturePolicyOptions{});
  trigger.SeedNextId(42);
  std::vector<std::pair<std::string, uint64_t>> asked;
  trigger.SetOnAsked(
      [&](const std::string& job, const CaptureDecision& d) { asked.emplace_back(job, d.id); });
  const Verdict clear = Clear(2);
  trigger.OnJobWindow(Window(clear, 100, 0));
  CHECK(asked.empty());                        // not under the job's lock: at Flush
  testing::FakeControlRequestSender sidecars;  // none serves a rank
  trigger.Flush(&sidecars);
  REQUIRE(asked.size() == 1);
  CHECK(asked[0] == std::make_pair(std::string("run"), uint64_t{42}));
  trigger.Flush(&sidecars);
  CHECK(asked.size() == 1);
  trigger.SeedNextId(7);  // never backwards
  absl::StatusOr<CaptureDecision> d =
      trigger.Manual("other", {0, 1}, 5, 4, 100, v1::ControlRequest(), kSecond);
  REQUIRE(d.ok());
  CHECK(d->id == 43);
}

TEST_CASE("the stubs' word on capture handlers reaches the policy with the window") {
  CaptureTrigger trigger(CapturePolicyOptions{});
  const Verdict clear = Clear(2);
  ClosedJobWindow w = Window(clear, 100, 0);
  w.rank_can_capture = {1, 1, 0, -1};  // rank 2 has no handler; rank 3 not known yet
  trigger.OnJobWindow(w);
  CHECK_THAT(trigger.Decisions("run").back().reason,
             Catch::Contains("cannot capture: no capture handler in the trainer of rank 2"));
  const Verdict clear0 = Clear(0);
  ClosedJobWindow w0 = Window(clear0, 200, kSecond);
  w0.rank_can_capture = {1, 1, 0, -1};
  trigger.OnJobWindow(w0);
  const CaptureDecision d = trigger.Decisions("run").back();
  REQUIRE(d.asked);
  CHECK(d.references == std::vector<int32_t>{1});  // never rank 2, nor 3 (not known yet)
}

TEST_CASE("requests no sidecar takes are counted, not kept") {
  CaptureTrigger trigger(CapturePolicyOptions{});
  testing::FakeControlRequestSender sidecars;  // none serves a rank
  const Verdict clear = Clear(2);
  trigger.OnJobWindow(Window(clear, 100, 0));
  CHECK(trigger.Flush(&sidecars) == 0);
  CHECK(trigger.counters().unreached == 3);  // the suspect and two references
  CHECK(trigger.Flush(&sidecars) == 0);
  CHECK(trigger.counters().unreached == 3);
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

TEST_CASE("automatic off: windows only teach the pace, the stages and the named rank") {
  CaptureTrigger trigger(CapturePolicyOptions{});
  trigger.set_automatic(false);
  const StageSchema schema = *StageSchema::Parse("data:io,forward:compute,sync:sync");
  Verdict v = Clear(2);
  Suspect s;
  s.rank = 2;
  s.stage = 1;
  v.suspects.push_back(s);
  ClosedJobWindow w = Window(v, 100, 0);
  w.schema = &schema;
  trigger.OnJobWindow(w);
  CHECK(trigger.Decisions("run").empty());  // nothing decided on its own
  absl::StatusOr<CaptureDecision> d =
      trigger.Manual("run", {0, 1, 2}, 5, 4, 100, w.job_control, kSecond);
  REQUIRE(d.ok());
  CHECK(d->suspects == std::vector<int32_t>{2});
  CHECK(d->references == std::vector<int32_t>{0, 1});
  CHECK(d->stage == "forward");
  REQUIRE(trigger.Decision("run", d->id).has_value());
  CHECK_FALSE(trigger.Decision("run", d->id + 1).has_value());
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

CapturePolicyOptions AskingOptions() {
  CapturePolicyOptions o;
  o.references = 1;
  o.delivery_seconds = 5;
  return o;
}

// Asks a capture at step 200 (windows 10 s apart) whose first step is 251.
void AskAt200(CaptureTrigger& trigger, testing::FakeControlRequestSender* sidecars) {
  sidecars->Serve("run", {0, 1, 2, 3});
  const Verdict healthy;
  trigger.OnJobWindow(Window(healthy, 100, 0));
  const Verdict clear = Clear(1);
  trigger.OnJobWindow(Window(clear, 200, 10 * kSecond));
  REQUIRE(trigger.Decisions("run").back().asked);
  REQUIRE(trigger.Decisions("run").back().first_step == 251);
  trigger.Flush(sidecars);
}

TEST_CASE("a capture after the job's last step is missed once the job finishes, and says why") {
  testing::FakeControlRequestSender sidecars;
  CaptureTrigger trigger(AskingOptions());
  AskAt200(trigger, &sidecars);
  trigger.OnJobFinished("other", 220, 11 * kSecond);  // another job's end changes nothing
  CHECK(trigger.Decisions("run").back().missed.empty());
  trigger.OnJobFinished("run", 230, 11 * kSecond);
  const CaptureDecision d = trigger.Decisions("run").back();
  CHECK(d.missed == "the job ended at step 230 before the capture's first step 251");
  // A finished job has no step left: a capture asked by hand is refused, and says why.
  v1::ControlRequest control;
  absl::StatusOr<CaptureDecision> manual =
      trigger.Manual("run", {0}, 2, 4, 230, control, 12 * kSecond);
  REQUIRE_FALSE(manual.ok());
  CHECK(manual.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(manual.status().message()), Catch::Contains("finished at step 230"));
  // A last window closing after the end asks no capture that would wait forever: missed at once.
  CapturePolicyOptions o = AskingOptions();
  o.cooldown_windows = 0;
  CaptureTrigger late(o);
  testing::FakeControlRequestSender more;
  AskAt200(late, &more);
  late.OnJobFinished("run", 260, 11 * kSecond);  // capture 1 overlapped the end: not missed
  CHECK(late.Decisions("run").back().missed.empty());
  const Verdict clear = Clear(1);
  late.OnJobWindow(Window(clear, 260, 12 * kSecond));
  REQUIRE(late.Decisions("run").back().asked);
  CHECK_THAT(late.Decisions("run").back().missed,
             Catch::StartsWith("the job ended at step 260 before the capture's first step"));
  // A re-run (a window of another newest step) runs again: captures are taken again.
  late.OnJobWindow(Window(clear, 40, 13 * kSecond));
  REQUIRE(late.Decisions("run").back().asked);
  CHECK(late.Decisions("run").back().missed.empty());
}

TEST_CASE("a capture whose steps the job reached ends when the job finishes, not missed") {
  testing::FakeControlRequestSender sidecars;
  CaptureTrigger trigger(AskingOptions());
  AskAt200(trigger, &sidecars);
  trigger.OnJobFinished("run", 253, 11 * kSecond);
  CHECK(trigger.Decisions("run").back().missed.empty());
  // No longer in flight: the next window after a re-run is decided, not "capture 1 in flight".
  const Verdict clear = Clear(1);
  trigger.OnJobWindow(Window(clear, 50, 12 * kSecond));
  CHECK(trigger.Decisions("run").back().reason != "capture 1 in flight");
}

TEST_CASE("a capture is missed when the job makes no progress towards it for the bound") {
  testing::FakeControlRequestSender sidecars;
  CapturePolicyOptions o = AskingOptions();
  o.finish_timeout_seconds = 60;
  CaptureTrigger trigger(o);
  AskAt200(trigger, &sidecars);
  // Windows closed 10 s apart: the bound is max(60 s, 3 x 10 s) after the last window.
  CHECK(trigger.MissStalled(69 * kSecond) == 0);
  CHECK(trigger.Decisions("run").back().missed.empty());
  CHECK(trigger.MissStalled(71 * kSecond) == 1);
  CHECK(trigger.Decisions("run").back().missed ==
        "the job made no progress past step 200 for 61 s before the capture's first step 251");
  CHECK(trigger.MissStalled(200 * kSecond) == 0);  // once
}

TEST_CASE("a slow job's rare windows stretch the stall bound") {
  testing::FakeControlRequestSender sidecars;
  CapturePolicyOptions o;
  o.finish_timeout_seconds = 60;
  o.references = 1;
  CaptureTrigger trigger(o);
  sidecars.Serve("run", {0, 1, 2, 3});
  const Verdict healthy;
  trigger.OnJobWindow(Window(healthy, 100, 0));
  const Verdict clear = Clear(1);
  trigger.OnJobWindow(Window(clear, 200, 100 * kSecond));  // a window each 100 s
  REQUIRE(trigger.Decisions("run").back().asked);
  CHECK(trigger.MissStalled(350 * kSecond) == 0);  // 250 s < 3 x 100 s
  CHECK(trigger.MissStalled(401 * kSecond) == 1);
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

v1::Stall HungStall(int64_t started_unix_ns) {
  v1::Stall s;
  s.set_reason("hung");
  s.set_alarm(true);
  s.set_started_unix_ns(started_unix_ns);
  s.set_text("rank 0 hung in forward at step 150");
  auto add = [&](int32_t rank, const char* role, const char* stage, int64_t step) {
    v1::StuckRank* r = s.add_ranks();
    r->set_rank(rank);
    r->set_role(role);
    r->set_stage(stage);
    r->set_step(step);
    r->set_open_ns(12 * kSecond);
  };
  add(0, "stuck", "forward", 150);
  add(1, "waiting", "grad_sync", 150);
  add(2, "waiting", "grad_sync", 150);
  return s;
}

TEST_CASE("a hang alarm asks the stuck rank and one waiting rank for stacks, once per stall") {
  std::vector<std::string> lines;
  CaptureTrigger trigger(CapturePolicyOptions{}, [&](const std::string& l) { lines.push_back(l); });
  trigger.set_automatic(false);  // stacks are asked whatever the automatic setting
  std::vector<std::pair<std::string, CaptureDecision>> asked;
  trigger.SetOnAsked(
      [&](const std::string& job, const CaptureDecision& d) { asked.emplace_back(job, d); });
  testing::FakeControlRequestSender sidecars;
  sidecars.Serve("run", {0, 1, 2, 3});

  v1::Stall pause = HungStall(1000);
  pause.set_reason("group_wide_pause");
  pause.set_alarm(false);
  trigger.OnJobStall("run", pause, 5 * kSecond);
  CHECK(trigger.Flush(&sidecars) == 0);  // a pause is no hang: nothing asked

  const v1::Stall hung = HungStall(2000);
  trigger.OnJobStall("run", hung, 6 * kSecond);
  trigger.OnJobStall("run", hung, 7 * kSecond);  // the same stall, changed: asked once
  CHECK(trigger.Flush(&sidecars) == 2);
  const std::vector<v1::ControlRequest> sent = sidecars.SentTo({0, 1, 2, 3});
  REQUIRE(sent.size() == 2);
  CHECK(sent[0].rank() == 0);
  CHECK(sent[1].rank() == 1);
  for (const v1::ControlRequest& r : sent) {
    CHECK(r.sets() == shm::kControlSetsStacks);
    CHECK(r.stacks_capture_id() == 1);
  }
  REQUIRE(asked.size() == 1);
  const CaptureDecision& d = asked[0].second;
  CHECK(d.kind == CaptureKind::kStacks);
  CHECK(d.suspects == std::vector<int32_t>{0});
  CHECK(d.references == std::vector<int32_t>{1});
  CHECK(d.first_step == 150);
  CHECK(d.stage == "forward");
  CHECK(d.notes.at(0) == "stuck in forward at step 150 for 12 s");
  CHECK(d.notes.at(1) == "waiting in grad_sync at step 150 for 12 s");
  CHECK(d.decided_unix_ns == 6 * kSecond);

  // The sidecar of rank 1 refused: its answer says why; rank 0 was signalled.
  v1::ControlAck ok;
  ok.set_job("run");
  ok.set_rank(0);
  ok.set_request_id(sent[0].request_id());
  ok.set_applied(true);
  trigger.OnControlAck(ok);
  v1::ControlAck refused = ok;
  refused.set_rank(1);
  refused.set_applied(false);
  refused.set_error("rank 1: not signalled: the trainer has no stack dump handler");
  trigger.OnControlAck(refused);
  const std::vector<RankCaptureAnswer> answers = trigger.Answers("run", d);
  REQUIRE(answers.size() == 2);
  CHECK(answers[0].state == shm::v1::kCaptureRunning);
  CHECK(answers[1].state == shm::v1::kCaptureFailed);
  CHECK(answers[1].error == "rank 1: not signalled: the trainer has no stack dump handler");
  // An ack of a request that is not a stack capture's leaves the answers alone.
  v1::ControlAck other = refused;
  other.set_request_id(7);
  trigger.OnControlAck(other);
  CHECK(trigger.Answers("run", d) == answers);

  // A new stall is a new capture.
  trigger.OnJobStall("run", HungStall(3000), 8 * kSecond);
  CHECK(trigger.Flush(&sidecars) == 2);
}

TEST_CASE("stacks: a desync asks two waiting ranks in different places; a dead rank is not asked") {
  CapturePolicy policy(CapturePolicyOptions{});
  CaptureStallFacts desync;
  desync.kind = "desync";
  desync.alarm = true;
  desync.started_unix_ns = 1;
  desync.ranks = {{.rank = 0, .role = "waiting", .stage = "grad_sync", .step = 40, .open_ns = 0},
                  {.rank = 1, .role = "waiting", .stage = "grad_sync", .step = 40, .open_ns = 0},
                  {.rank = 2, .role = "waiting", .stage = "barrier", .step = 40, .open_ns = 0}};
  CaptureDecision d = policy.OnStall("run", desync, 0, 0);
  CHECK(d.asked);
  CHECK(d.suspects.empty());
  CHECK(d.references == std::vector<int32_t>{0, 2});

  CaptureStallFacts dead = desync;
  dead.kind = "dead";
  dead.started_unix_ns = 2;
  dead.ranks = {{.rank = 3, .role = "dead", .stage = "forward", .step = 41, .open_ns = 0},
                {.rank = 0, .role = "waiting", .stage = "grad_sync", .step = 41, .open_ns = 0}};
  d = policy.OnStall("run", dead, 1, 1);
  CHECK(d.asked);
  CHECK(d.ranks() == std::vector<int32_t>{0});

  // A collective that never completes: every rank waits in one place; two of them are asked.
  CaptureStallFacts collective = desync;
  collective.kind = "collective";
  collective.started_unix_ns = 3;
  for (CaptureStallFacts::Rank& r : collective.ranks) r.stage = "grad_sync";
  d = policy.OnStall("run", collective, 2, 2);
  CHECK(d.asked);
  CHECK(d.references == std::vector<int32_t>{0, 1});

  // The hourly cap: skipped with the reason, kept.
  CapturePolicyOptions o;
  o.max_stacks_per_hour = 1;
  CapturePolicy capped(o);
  CHECK(capped.OnStall("run", desync, 0, 0).asked);
  desync.started_unix_ns = 5;
  d = capped.OnStall("run", desync, 10, 10);
  CHECK_FALSE(d.asked);
  CHECK(d.reason == "stacks: 1 stack captures in the last hour (the cap)");
  CHECK(capped.Decisions("run").size() == 2);
}

}  // namespace
}  // namespace stagefrontier
