// When the sidecar sends health (health_cadence.h): every second while a stall may be forming or
// while it has news, otherwise only to fill a 9.5 s silence (a batch counts; 4.5 s against a
// coordinator that does not say its step deadline) and at least every 30 s.
#include "daemon/sidecar/health_cadence.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

namespace stagefrontier {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1000 * kMs;

// Runs a cadence from 0 to `end_ns` in 10 ms polls with a batch every `batch_every_ns` (0: none);
// returns when health went out.
std::vector<int64_t> Run(int64_t end_ns, int64_t batch_every_ns, bool stage_open_long,
                         HealthCadenceOptions options = {}) {
  HealthCadence c(options);
  c.Start(0);
  c.Sent(0, true);  // the health before the stream's first batch (it declares the ranks)
  std::vector<int64_t> sent{0};
  for (int64_t t = 10 * kMs; t <= end_ns; t += 10 * kMs) {
    if (c.Due(t, stage_open_long)) {
      sent.push_back(t);
      c.Sent(t, true);
    }
    if (batch_every_ns > 0 && t > 0 && t % batch_every_ns == 0) c.Sent(t, false);
  }
  return sent;
}

TEST_CASE("nothing before a stream; the cadence counts from its start") {
  HealthCadence c;
  CHECK_FALSE(c.Due(100 * kS, false));  // no stream yet
  c.Start(5 * kS);
  CHECK(c.last_health_ns() == 5 * kS);  // the health that goes before the declaring batch
  CHECK_FALSE(c.Due(5 * kS, false));
  CHECK(c.NextNs(false) == 14500 * kMs);
  CHECK(c.NextNs(true) == 6 * kS);
  CHECK(c.NextNs(false, /*news=*/true) == 6 * kS);
  c.Sent(7 * kS, /*health=*/false);  // a batch is no health
  CHECK(c.last_health_ns() == 5 * kS);
  c.Sent(8 * kS, /*health=*/true);
  CHECK(c.last_health_ns() == 8 * kS);
}

TEST_CASE("batches every 8 s: no health between them, one every 30 s") {
  // 1 step/s, 8 steps per message (the 100,000-GPU shape): health only at the 30 s max gap.
  CHECK(Run(65 * kS, 8 * kS, false) == std::vector<int64_t>{0, 30 * kS, 60 * kS});
  // Batches every 10 s: a health 9.5 s after each.
  CHECK(Run(21 * kS, 10 * kS, false) == std::vector<int64_t>{0, 9500 * kMs, 19500 * kMs});
  // Against a coordinator that does not say its step deadline (quiet capped at 4.5 s): batches
  // 4 s apart need no health either; 5 s apart, one 4.5 s after each.
  const HealthCadenceOptions capped = {.quiet_after_ns = 4500 * kMs};
  CHECK(Run(65 * kS, 4 * kS, false, capped) == std::vector<int64_t>{0, 30 * kS, 60 * kS});
  CHECK(Run(11 * kS, 5 * kS, false, capped) == std::vector<int64_t>{0, 4500 * kMs, 9500 * kMs});
  // The previous defaults (--health-quiet-ms 2500 --health-max-gap-ms 5000, beside a
  // coordinator with a 3 s limit): one health per 4 s batch.
  constexpr int64_t kHalf = kS / 2;
  CHECK(Run(11 * kS, 4 * kS, false, {.quiet_after_ns = 2500 * kMs, .max_gap_ns = 5 * kS}) ==
        std::vector<int64_t>{0, 2 * kS + kHalf, 6 * kS + kHalf, 10 * kS + kHalf});
}

// Health that comes due before the next batch rides this one (StepBatch.health, issue 33):
// 1 step/s, 8 steps per message, the 9 s hold: a health every 24 s riding a batch, none alone.
TEST_CASE("batches every 8 s, health riding them: no health message alone") {
  HealthCadence c;
  c.Start(0);
  c.Sent(0, true);
  std::vector<int64_t> alone, riding;
  for (int64_t t = 10 * kMs; t <= 65 * kS; t += 10 * kMs) {
    if (c.Due(t, false)) {
      alone.push_back(t);
      c.Sent(t, true);
    }
    if (t % (8 * kS) != 0) continue;
    if (c.RidesBatch(t, 9 * kS, false)) {
      riding.push_back(t);
      c.Sent(t, true);
    }
    c.Sent(t, false);
  }
  CHECK(alone.empty());
  CHECK(riding == std::vector<int64_t>{24 * kS, 48 * kS});
  // Riding never comes later than due: with the health of 24 s and a batch at 32 s, at 40 s
  // the health is due at 54 s, past the next batch's reach (49 s); at 48 s it would be due
  // before the next batch (57 s).
  HealthCadence d;
  d.Start(0);
  d.Sent(24 * kS, true);
  d.Sent(32 * kS, false);
  CHECK_FALSE(d.RidesBatch(40 * kS, 9 * kS, false));
  d.Sent(40 * kS, false);
  CHECK(d.RidesBatch(48 * kS, 9 * kS, false));
  // A stall forming (every second) or news: health rides a batch once it is due, not before:
  // those cadences are caps too.
  HealthCadence e;
  e.Start(0);
  e.Sent(24 * kS, true);
  CHECK_FALSE(e.RidesBatch(24500 * kMs, 9 * kS, true));
  CHECK(e.RidesBatch(25 * kS, 9 * kS, true));
  CHECK_FALSE(e.RidesBatch(24500 * kMs, 9 * kS, false, /*news=*/true));
  CHECK(e.RidesBatch(25 * kS, 9 * kS, false, /*news=*/true));
  // No stream yet: nothing rides.
  CHECK_FALSE(HealthCadence().RidesBatch(kS, 9 * kS, true));
}

// Regression (CI, 2026-11-30, e2e_hostile_capture_answer_test): a capture answer flipped at
// every poll rode every batch (about every 36 ms at 4 ms steps) up to a hold early: 43 reports
// in 3 s against the cap of one per 100 ms.
TEST_CASE("a capture answer rides a batch no sooner than its 100 ms cap") {
  HealthCadence c;
  c.Start(0);
  c.Sent(0, true);
  const int64_t hold = 36 * kMs;
  int reports = 0;
  int64_t last = 0;
  for (int64_t t = 4 * kMs; t <= 3 * kS; t += 4 * kMs) {  // a batch every 4 ms step
    if (c.RidesBatch(t, hold, false, false, /*urgent=*/true)) {
      CHECK(t - last >= 100 * kMs);
      last = t;
      ++reports;
      c.Sent(t, true);
    }
    c.Sent(t, false);
  }
  CHECK(reports == 30);
}

TEST_CASE("no batches: health every 9.5 s") {
  const std::vector<int64_t> sent = Run(20 * kS, 0, false);
  CHECK(sent == std::vector<int64_t>{0, 9500 * kMs, 19 * kS});
}

TEST_CASE("news goes a second after the last health at the latest, not at the quiet cadence") {
  HealthCadence c;
  c.Start(0);
  c.Sent(0, true);
  c.Sent(3 * kS, false);  // a batch
  CHECK_FALSE(c.Due(3500 * kMs, false));
  CHECK(c.Due(3500 * kMs, false, /*news=*/true));  // an owner gone, a self-test answer
  c.Sent(3500 * kMs, true);
  // News again at once (drops at every step): at most once a second.
  CHECK_FALSE(c.Due(4 * kS, false, true));
  CHECK(c.Due(4500 * kMs, false, true));
}

TEST_CASE("a stall forming: every second, batches or not") {
  CHECK(Run(4 * kS, kS / 2, true) == std::vector<int64_t>{0, kS, 2 * kS, 3 * kS, 4 * kS});
  CHECK(Run(3 * kS, 0, true) == std::vector<int64_t>{0, kS, 2 * kS, 3 * kS});
  // From quiet to stalled: due one second after the last health, not two after the last message.
  HealthCadence c;
  c.Start(0);
  c.Sent(0, true);
  c.Sent(900 * kMs, false);
  CHECK_FALSE(c.Due(1500 * kMs, false));
  CHECK(c.Due(1500 * kMs, true));
}

TEST_CASE("custom periods") {
  HealthCadence c({.stalled_every_ns = 200 * kMs, .quiet_after_ns = 500 * kMs, .max_gap_ns = kS});
  c.Start(0);
  c.Sent(0, true);
  CHECK(c.NextNs(true) == 200 * kMs);
  CHECK(c.NextNs(false) == 500 * kMs);
  c.Sent(400 * kMs, false);
  CHECK(c.NextNs(false) == 900 * kMs);
  c.Sent(800 * kMs, false);
  CHECK(c.NextNs(false) == kS);  // the max gap since the last health
}

v1::SlotHealth* Slot(v1::Health* h, int rank) {
  v1::SlotHealth* s = h->add_slots();
  s->set_job("j");
  s->set_rank(rank);
  s->set_owner("alive");
  s->set_owner_pid(100 + rank);
  return s;
}

TEST_CASE("health's news: everything but the progress of stepping ranks") {
  v1::Health a;
  Slot(&a, 0);
  Slot(&a, 1);
  const std::string base = HealthNews(a);
  // Progress at every step: not news.
  v1::Health moved = a;
  moved.mutable_slots(0)->set_records_read(900);
  moved.mutable_slots(0)->set_pending(3);
  moved.mutable_slots(1)->set_probe_intervals(40);
  moved.mutable_slots(1)->set_open_known(true);
  moved.mutable_slots(1)->set_open_step(17);
  moved.mutable_slots(1)->set_open_stage("fwd");
  moved.mutable_slots(1)->set_open_age_ns(5);
  CHECK(HealthNews(moved) == base);
  // What the coordinator acts on: news.
  const auto news = [&](auto change) {
    v1::Health h = a;
    change(h.mutable_slots(1));
    return HealthNews(h) != base;
  };
  CHECK(news([](v1::SlotHealth* s) { s->set_owner("dead"); }));
  CHECK(news([](v1::SlotHealth* s) { s->set_owner_pid(7); }));
  CHECK(news([](v1::SlotHealth* s) { s->set_dropped_by_writer(1); }));
  CHECK(news([](v1::SlotHealth* s) { s->set_gap_steps(1); }));
  CHECK(news([](v1::SlotHealth* s) { s->set_clock_ahead(1); }));
  CHECK(news([](v1::SlotHealth* s) { s->set_selftest_state(1); }));
  CHECK(news([](v1::SlotHealth* s) { s->set_layout_source("declared"); }));
  CHECK(news([](v1::SlotHealth* s) { s->set_last_error("torn record"); }));
  // A released slot read to its end: the coordinator takes the rank for finished.
  v1::Health released = a;
  released.mutable_slots(1)->set_owner("none");
  released.mutable_slots(1)->set_pending(4);
  const std::string draining = HealthNews(released);
  CHECK(draining != base);
  released.mutable_slots(1)->set_pending(2);
  CHECK(HealthNews(released) == draining);
  released.mutable_slots(1)->set_pending(0);
  CHECK(HealthNews(released) != draining);
  // A slot claimed or released.
  v1::Health more = a;
  Slot(&more, 2);
  CHECK(HealthNews(more) != base);
  v1::Health fewer;
  *fewer.add_slots() = a.slots(0);
  CHECK(HealthNews(fewer) != base);
}

// The coordinator says after the Hello what it holds the sidecar to (StreamLimits): the cadence
// stays inside it whatever the flags ask, and against a coordinator that predates the message
// (its stall watch took a sidecar for lost after 3 s) it is that coordinator's cadence.
TEST_CASE("the cadence stays inside the coordinator's limits") {
  v1::StreamLimits limits;
  limits.set_silent_after_ms(4750);
  limits.set_idle_timeout_ms(60'000);
  // The defaults are the caps of today's coordinator: unchanged.
  limits.set_step_deadline_ms(10'000);
  const HealthCadenceOptions defaults;
  HealthCadenceOptions got = CadenceFor(defaults, &limits);
  CHECK(got.stalled_every_ns == defaults.stalled_every_ns);
  CHECK(got.quiet_after_ns == defaults.quiet_after_ns);
  CHECK(got.max_gap_ns == defaults.max_gap_ns);
  // Its step deadline bounds the quiet: the longest batch hold (9 s) and 500 ms.
  CHECK(CadenceFor({.quiet_after_ns = 60 * kS}, &limits).quiet_after_ns == 9500 * kMs);
  limits.set_step_deadline_ms(5'000);  // --step-deadline-ms 5000: holds under 4 s
  CHECK(CadenceFor(defaults, &limits).quiet_after_ns == 4500 * kMs);
  // A coordinator that does not say its deadline: 250 ms under its silence limit.
  limits.clear_step_deadline_ms();
  CHECK(CadenceFor(defaults, &limits).quiet_after_ns == 4500 * kMs);
  // Flags past them (--health-every-ms 60000 --health-quiet-ms 60000 --health-max-gap-ms
  // 120000): a stalled rank's sidecar would read as lost, an idle stream be ended.
  got = CadenceFor({.stalled_every_ns = 60 * kS, .quiet_after_ns = 60 * kS, .max_gap_ns = 120 * kS},
                   &limits);
  CHECK(got.stalled_every_ns == 4500 * kMs);
  CHECK(got.quiet_after_ns == 4500 * kMs);
  CHECK(got.max_gap_ns == 30 * kS);
  // Shorter than the caps: kept.
  got = CadenceFor({.stalled_every_ns = 200 * kMs, .quiet_after_ns = 200 * kMs, .max_gap_ns = kS},
                   &limits);
  CHECK(got.stalled_every_ns == 200 * kMs);
  CHECK(got.quiet_after_ns == 200 * kMs);
  CHECK(got.max_gap_ns == kS);
  // No idle timeout (--idle-timeout-ms 0): no cap on the max gap.
  limits.set_idle_timeout_ms(0);
  CHECK(CadenceFor({.max_gap_ns = 600 * kS}, &limits).max_gap_ns == 600 * kS);
  // A coordinator from before StreamLimits: health after 2.5 s, at least every 5 s (the flags
  // the docs asked such sidecars to be started with, now by themselves).
  got = CadenceFor(defaults, nullptr);
  CHECK(got.stalled_every_ns == kS);
  CHECK(got.quiet_after_ns == 2500 * kMs);
  CHECK(got.max_gap_ns == 5 * kS);
  // With it, a batch every 4 s gets a health 2.5 s after it, as that coordinator needs.
  constexpr int64_t kHalf = kS / 2;
  CHECK(Run(11 * kS, 4 * kS, false, got) ==
        std::vector<int64_t>{0, 2 * kS + kHalf, 6 * kS + kHalf, 10 * kS + kHalf});
}

TEST_CASE("limits out of any sane range stay in range") {
  v1::StreamLimits limits;
  limits.set_silent_after_ms(INT64_MAX);
  limits.set_idle_timeout_ms(INT64_MAX);
  HealthCadenceOptions got = CadenceFor({}, &limits);  // no overflow: the defaults stand
  CHECK(got.quiet_after_ns == 9500 * kMs);
  CHECK(got.max_gap_ns == 30 * kS);
  limits.set_silent_after_ms(1);  // under the 250 ms margin: still 100 ms, never 0 or less
  limits.set_idle_timeout_ms(1);
  got = CadenceFor({}, &limits);
  CHECK(got.quiet_after_ns == 100 * kMs);
  CHECK(got.stalled_every_ns == 100 * kMs);
  CHECK(got.max_gap_ns == 100 * kMs);
  limits.set_silent_after_ms(-5);  // unset or negative: no cap from it
  limits.set_idle_timeout_ms(-5);
  got = CadenceFor({}, &limits);
  CHECK(got.quiet_after_ns == 9500 * kMs);
  limits.set_silent_after_ms(4750);  // a deadline past any sane one: no overflow either
  limits.set_step_deadline_ms(INT64_MAX);
  got = CadenceFor({}, &limits);
  CHECK(got.quiet_after_ns == 9500 * kMs);
  CHECK(got.stalled_every_ns == kS);
  CHECK(got.max_gap_ns == 30 * kS);
}

TEST_CASE("new limits keep what was sent") {
  HealthCadence c(kPredatingCoordinator);
  c.Start(0);
  c.Sent(0, true);
  CHECK(c.NextNs(false) == 2500 * kMs);
  c.set_options({});  // today's coordinator said its limits
  CHECK(c.NextNs(false) == 9500 * kMs);
}

// A capture answer goes at once (the next request's answer may replace it in the slot), but a
// slot is the trainer's user's to write: at most every 100 ms however often it changes.
TEST_CASE("capture answers: at once, at most every 100 ms") {
  HealthCadence c;
  c.Start(0);
  c.Sent(0, true);
  c.Sent(50 * kMs, false);  // a batch
  CHECK_FALSE(c.Due(60 * kMs, false, false, /*urgent=*/true));
  CHECK(c.Due(100 * kMs, false, false, /*urgent=*/true));
  // An answer flipping at every 1 ms poll for 3 s: 30 reports, not 3,000.
  int sent = 0;
  for (int64_t t = 100 * kMs; t < 3100 * kMs; t += kMs) {
    if (c.Due(t, false, false, true)) {
      ++sent;
      c.Sent(t, true);
    }
  }
  CHECK(sent == 30);
  // A stall cadence set under 100 ms is not slowed by it.
  HealthCadence fast({.stalled_every_ns = 20 * kMs});
  fast.Start(0);
  fast.Sent(0, true);
  CHECK(fast.Due(20 * kMs, false, false, true));
}

}  // namespace
}  // namespace stagefrontier
