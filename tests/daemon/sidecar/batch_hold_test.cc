// The sidecar's own batching (batch_hold.h): batches end on a step every rank of the job on the
// node finished, K steps per message from the node's rank count, bounded in time and by what the
// coordinator says (its step deadline, stall floor and window: HoldFor).
#include "daemon/sidecar/batch_hold.h"

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1000 * kMs;

// `ranks` ranks of job "j" finish step `step` at `t` (each drained at once).
void Finish(BatchHold& hold, int ranks, int64_t step, int64_t t) {
  for (int r = 0; r < ranks; ++r) hold.Note("j", r, step, t);
}

TEST_CASE("steps per message come from the ranks on the node") {
  for (const auto& [ranks, k] : std::vector<std::pair<int, int64_t>>{
           {1, 8}, {4, 8}, {8, 8}, {9, 4}, {16, 4}, {17, 2}, {32, 2}, {33, 1}, {64, 1}}) {
    BatchHold hold;
    Finish(hold, ranks, 0, 0);
    INFO(ranks << " ranks");
    CHECK(hold.StepsPerMessage("j") == k);
  }
  BatchHold hold;
  CHECK(hold.StepsPerMessage("other") == 0);
}

// Limits as today's coordinator says them (coordinator_server.cc): a 10 s step deadline.
v1::StreamLimits Limits(int64_t deadline_ms = 10'000, int64_t window = 100) {
  v1::StreamLimits l;
  l.set_silent_after_ms(4750);
  l.set_idle_timeout_ms(60'000);
  l.set_step_deadline_ms(deadline_ms);
  l.set_stall_after_ms(5'000);
  l.set_window_steps(window);
  return l;
}

// `steps` steps of `ranks` ranks, `step_ns` apart (the ranks half a millisecond apart); the steps
// whose end sent a batch.
std::vector<int64_t> SentAfter(BatchHold& hold, int64_t steps, int64_t step_ns, int ranks = 8) {
  int64_t oldest = -1;
  std::vector<int64_t> sent_after;
  for (int64_t step = 0; step < steps; ++step) {
    for (int r = 0; r < ranks; ++r) {
      const int64_t t = step * step_ns + r * kMs / 2;
      hold.Note("j", r, step, t);
      if (oldest < 0) oldest = t;
      if (hold.Due(t, oldest)) {
        // Never before every rank here finished the batch's last step; at step 0 the hold knows
        // only the ranks noted so far (a phase whose boundary is step 0 sends the first alone).
        if (step > 0) CHECK(r == ranks - 1);
        sent_after.push_back(step);
        hold.Sent(t);
        oldest = -1;
      }
    }
  }
  return sent_after;
}

TEST_CASE("today's coordinator: an 8-rank node at 1 step/s sends steps 0-7, 8-15, ...") {
  const v1::StreamLimits limits = Limits();
  BatchHold hold(HoldFor({}, &limits));
  CHECK(SentAfter(hold, 24, kS) == std::vector<int64_t>{7, 15, 23});
  CHECK(hold.StepsPerMessage("j") == 8);
  // Held at most 80% of the stall limit (10 x 1 s): the coordinator sees the job advance only
  // when a batch comes.
  hold.Note("j", 0, 24, 24 * kS);
  CHECK(hold.HoldNs() == 8 * kS);
}

TEST_CASE("a window's last step ends a batch, whatever K") {
  const v1::StreamLimits limits = Limits(10'000, 20);
  BatchHold hold(HoldFor({}, &limits));
  // Phase 0: K boundaries on multiples of K.
  CHECK(SentAfter(hold, 40, 10 * kMs) == std::vector<int64_t>{7, 15, 19, 23, 31, 39});
}

TEST_CASE("a node's phase moves its K boundaries, never a window's last step") {
  const v1::StreamLimits limits = Limits(10'000, 20);
  // Phase 3 of K = 8: batches end at steps s with (s + 4) % 8 == 0 (the first holds 5 steps).
  BatchHold three(HoldFor({.phase_seed = 3}, &limits));
  CHECK(SentAfter(three, 40, 10 * kMs) == std::vector<int64_t>{4, 12, 19, 20, 28, 36, 39});
  // The seed is taken modulo K: 8 + 7 is phase 7 (after steps 0, 8, 16, ...).
  BatchHold seven(HoldFor({.phase_seed = 15}, &limits));
  CHECK(SentAfter(seven, 24, 10 * kMs) == std::vector<int64_t>{0, 8, 16, 19});
  // Under K = 4 (9 ranks on the node) the same seed is phase 3: after steps 0, 4, 8, ...
  BatchHold nine(HoldFor({.phase_seed = 15}, &limits));
  CHECK(SentAfter(nine, 10, 10 * kMs, 9) == std::vector<int64_t>{0, 4, 8});
  CHECK(nine.StepsPerMessage("j") == 4);
}

TEST_CASE("a job's nodes spread over the phases by their names") {
  // 12,500 nodes named as the load harness names them: each of the 8 phases gets about an
  // eighth (1,562), so a coordinator gets an eighth of the nodes' batches at each step.
  std::vector<int> per_phase(8, 0);
  for (int n = 0; n < 12'500; ++n) ++per_phase[PhaseSeedFor("load-node-" + std::to_string(n)) % 8];
  for (int phase = 0; phase < 8; ++phase) {
    INFO("phase " << phase);
    CHECK(per_phase[static_cast<size_t>(phase)] > 1'400);
    CHECK(per_phase[static_cast<size_t>(phase)] < 1'720);
  }
  // The same name, the same seed (the sidecar's is stable over restarts); names differ.
  CHECK(PhaseSeedFor("gpu-node-17") == PhaseSeedFor(std::string("gpu-node-") + "17"));
  CHECK(PhaseSeedFor("gpu-node-17") != PhaseSeedFor("gpu-node-18"));
}

TEST_CASE("K steps end before the hold runs out: slower steps, fewer per message") {
  const v1::StreamLimits limits = Limits();
  BatchHold hold(HoldFor({}, &limits));
  // 1.3 s steps: 8 would end 9.1 s after the first one's, past the 9 s hold less 500 ms.
  CHECK(SentAfter(hold, 12, 1'300 * kMs) == std::vector<int64_t>{3, 7, 11});
  CHECK(hold.StepsPerMessage("j") == 4);
  // A coordinator with --step-deadline-ms 5000: holds under 4 s, 4 steps at 1 step/s.
  const v1::StreamLimits five = Limits(5'000);
  BatchHold short_hold(HoldFor({}, &five));
  CHECK(SentAfter(short_hold, 12, kS) == std::vector<int64_t>{3, 7, 11});
}

TEST_CASE("HoldFor: under the coordinator's step deadline, its stall floor and window") {
  BatchHoldOptions o = HoldFor({}, nullptr);  // no limits yet, or a coordinator before them
  CHECK(o.max_hold_ns == 4 * kS);
  v1::StreamLimits l = Limits();
  o = HoldFor({}, &l);
  CHECK(o.max_hold_ns == 9 * kS);
  CHECK(o.stall_after_ns == 5 * kS);
  CHECK(o.window_steps == 100);
  l.set_step_deadline_ms(1'500);  // short deadlines: half of it
  CHECK(HoldFor({}, &l).max_hold_ns == 750 * kMs);
  l.set_step_deadline_ms(0);  // a coordinator that does not say it: its deadline is 5 s
  CHECK(HoldFor({}, &l).max_hold_ns == 4 * kS);
  l.set_step_deadline_ms(-5);  // negative (a hostile or broken coordinator): as if unsaid
  l.set_stall_after_ms(-5);
  l.set_window_steps(-5);
  o = HoldFor({}, &l);
  CHECK(o.max_hold_ns == 4 * kS);
  // The log says what was taken, not the value said.
  CHECK(DescribeHold(l, o) ==
        "the coordinator closes a step 5000 ms (it says no deadline: an older coordinator's) "
        "after its first record: batches held at most 4000 ms");
  CHECK(o.stall_after_ns == 5 * kS);
  CHECK(o.window_steps == 100);
  l.set_step_deadline_ms(INT64_MAX);  // no overflow; the sidecar's own bound (a minute) stands
  l.set_stall_after_ms(INT64_MAX);
  l.set_window_steps(INT64_MAX);
  o = HoldFor({}, &l);
  CHECK(o.max_hold_ns == 60 * kS);
  CHECK(DescribeHold(l, o) ==
        "the coordinator closes a step 86400000 ms after its first record: batches held at "
        "most 60000 ms");
  CHECK(o.stall_after_ns > 0);
  CHECK(o.window_steps > 0);
  BatchHold hold(o);
  for (int64_t step = 0; step < 3; ++step) Finish(hold, 8, step, step * kS);
  CHECK(hold.HoldNs() > 0);
  CHECK(hold.HoldNs() <= 60 * kS);
}

TEST_CASE("before a coordinator's limits: an 8-rank node at 1 step/s sends steps 0-3, 4-7, ...") {
  BatchHold hold;  // holds under 4 s: 4 steps
  CHECK(SentAfter(hold, 12, kS) == std::vector<int64_t>{3, 7, 11});
}

TEST_CASE("a 100-step window starting at step 0 ends a batch") {
  BatchHold hold;
  for (int64_t step = 0; step <= 99; ++step) {
    Finish(hold, 8, step, step * 10 * kMs);
    if (hold.Due(step * 10 * kMs, step * 10 * kMs - 10 * kMs)) {
      hold.Sent(step * 10 * kMs);
      if (step == 99) SUCCEED("step 99 ended a batch");
    } else {
      CHECK(step != 99);
    }
  }
}

TEST_CASE("the hold ends after (K + 1) step times when a boundary does not come") {
  BatchHold hold;
  // 100 ms steps: the hold learns the step time from successive drains.
  for (int64_t step = 0; step < 4; ++step) Finish(hold, 8, step, step * 100 * kMs);
  hold.Sent(300 * kMs);
  // Rank 3 stops after step 4; the others go on: the boundary at step 7 is never complete.
  for (int64_t step = 4; step < 8; ++step) {
    for (int r = 0; r < 8; ++r) {
      if (r == 3 && step > 4) continue;
      hold.Note("j", r, step, step * 100 * kMs);
    }
  }
  const int64_t oldest = 400 * kMs;
  CHECK_FALSE(hold.Due(700 * kMs, oldest));
  CHECK(hold.StepsPerMessage("j") == 8);
  CHECK(hold.HoldNs() == 9 * 100 * kMs);
  CHECK_FALSE(hold.Due(oldest + 9 * 100 * kMs - 1, oldest));
  CHECK(hold.Due(oldest + 9 * 100 * kMs, oldest));
}

TEST_CASE("the hold never passes max_hold_ns; slow steps go one per message") {
  BatchHold hold;
  Finish(hold, 8, 0, 0);
  Finish(hold, 8, 1, 10 * kS);  // 10 s steps: 2 would end past the 4 s hold
  hold.Sent(10 * kS);
  hold.Note("j", 0, 2, 20 * kS);
  CHECK(hold.StepsPerMessage("j") == 1);
  CHECK(hold.HoldNs() == 4 * kS);
  CHECK(hold.Due(20 * kS, 20 * kS));  // each step ends a batch
}

TEST_CASE("a rank that stopped no longer holds its job's batches back") {
  BatchHold hold;
  Finish(hold, 4, 0, 0);
  // Rank 2 stops at step 0; the others finish steps 1-3 within 3 s: step 3 is not complete.
  int64_t t = 0;
  for (int64_t step = 1; step <= 3; ++step) {
    t = step * 900 * kMs;
    for (int r : {0, 1, 3}) hold.Note("j", r, step, t);
  }
  CHECK_FALSE(hold.Due(t, t));
  // Once rank 2 has been idle past rank_idle_ns (3 s), the next boundary counts without it.
  t = 3 * kS + 500 * kMs;
  for (int r : {0, 1, 3}) hold.Note("j", r, 7, t);
  CHECK(hold.Due(t, t));
}

TEST_CASE("step numbers that go back (a new run) start the job again") {
  BatchHold hold;
  Finish(hold, 2, 500, 0);
  hold.Sent(0);
  Finish(hold, 2, 0, kS);
  Finish(hold, 2, 1, kS + 10 * kMs);
  for (int64_t step = 2; step <= 6; ++step) Finish(hold, 2, step, kS + step * 10 * kMs);
  CHECK_FALSE(hold.Due(kS + 60 * kMs, kS));
  Finish(hold, 2, 7, kS + 70 * kMs);
  CHECK(hold.Due(kS + 70 * kMs, kS));
}

TEST_CASE("two jobs: either one's boundary sends the batch") {
  BatchHold hold;
  for (int r = 0; r < 8; ++r) hold.Note("a", r, 1, 0);
  for (int r = 0; r < 8; ++r) hold.Note("b", r, 6, 0);
  CHECK_FALSE(hold.Due(1, 0));
  for (int r = 0; r < 8; ++r) hold.Note("b", r, 7, 10 * kMs);
  CHECK(hold.Due(10 * kMs, 0));
  hold.Sent(10 * kMs);
  for (int r = 0; r < 8; ++r) hold.Note("a", r, 2, 20 * kMs);
  CHECK_FALSE(hold.Due(20 * kMs, 20 * kMs));
}

TEST_CASE("a trainer's wild step numbers hold no other job back and never stretch the hold") {
  // Step numbers come from segments a trainer's user writes: one jumping to the largest valid
  // step, back to 0, and stopping mid-batch.
  BatchHold hold;
  hold.Note("wild", 0, (int64_t{1} << 40) - 1, 0);
  hold.Note("wild", 0, 0, kMs);
  hold.Note("wild", 0, 1, 2 * kMs);
  CHECK(hold.HoldNs() <= 4 * kS);
  CHECK(hold.HoldNs() > 0);
  // The other job's boundary sends the batch at once.
  for (int r = 0; r < 8; ++r) hold.Note("good", r, 7, 3 * kMs);
  CHECK(hold.Due(3 * kMs, 0));
  hold.Sent(3 * kMs);
  // And the wild job alone is held no longer than max_hold_ns.
  hold.Note("wild", 0, 2, 4 * kMs);
  CHECK(hold.Due(4 * kMs + 4 * kS, 4 * kMs));
}

TEST_CASE("ranks gone for a minute are forgotten") {
  BatchHold hold;
  Finish(hold, 8, 0, 0);
  hold.Sent(61 * kS);
  CHECK(hold.StepsPerMessage("j") == 0);
}

}  // namespace
}  // namespace stagefrontier
