#include "daemon/captures/capture_trigger.h"

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

// A sidecar's stream: keeps what it is sent.
class Recorder : public SessionWriter {
 public:
  bool Send(const v1::CoordinatorMessage& m) override {
    sent.push_back(m);
    return true;
  }
  std::vector<v1::CoordinatorMessage> sent;
};

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
  CaptureTrigger trigger(o, [&](const std::string& l) { lines.push_back(l); });
  SidecarSessions sessions;
  Recorder node_a, node_b;
  auto a = sessions.Add("a", &node_a);
  auto b = sessions.Add("b", &node_b);
  for (int r : {0, 1}) sessions.Bind(a, "run", r);
  for (int r : {2, 3}) sessions.Bind(b, "run", r);

  const Verdict healthy;
  trigger.OnJobWindow(Window(healthy, 100, 0));  // learns the pace: 100 steps in 10 s
  const Verdict clear = Clear(1);
  trigger.OnJobWindow(Window(clear, 200, 10 * kSecond));
  CHECK(trigger.Flush(&sessions) == 2);
  REQUIRE(node_a.sent.size() == 1);
  REQUIRE(node_b.sent.size() == 1);
  const v1::ControlRequest& suspect = node_a.sent[0].control();
  const v1::ControlRequest& reference = node_b.sent[0].control();
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
  CHECK(trigger.Flush(&sessions) == 0);  // nothing left

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
  sessions.Remove(a);
  sessions.Remove(b);
}

TEST_CASE("requests no sidecar takes are counted, not kept") {
  CaptureTrigger trigger(CapturePolicyOptions{});
  SidecarSessions sessions;
  const Verdict clear = Clear(2);
  trigger.OnJobWindow(Window(clear, 100, 0));
  CHECK(trigger.Flush(&sessions) == 0);
  CHECK(trigger.counters().unreached == 3);  // the suspect and two references
  CHECK(trigger.Flush(&sessions) == 0);
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
