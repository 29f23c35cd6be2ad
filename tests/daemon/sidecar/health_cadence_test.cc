// When the sidecar sends health (health_cadence.h): every second while a stall may be forming,
// otherwise only to fill a 2.5 s silence (a batch counts) and at least every 5 s.
#include "daemon/sidecar/health_cadence.h"

#include <catch2/catch.hpp>
#include <vector>

namespace stagefrontier {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kS = 1000 * kMs;

// Runs a cadence from 0 to `end_ns` in 10 ms polls with a batch every `batch_every_ns` (0: none);
// returns when health went out.
std::vector<int64_t> Run(int64_t end_ns, int64_t batch_every_ns, bool stage_open_long) {
  HealthCadence c;
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
  CHECK_FALSE(c.Due(5 * kS, false));
  CHECK(c.NextNs(false) == 7500 * kMs);
  CHECK(c.NextNs(true) == 6 * kS);
}

TEST_CASE("batches every 4 s: one health between two batches, none lost to silence") {
  // 1 step/s, 4 steps per message (the 100,000-GPU shape): health at 0, then 2.5 s after each
  // batch — never half-way (2 s would fall due with the next batch, racing it).
  constexpr int64_t kHalf = kS / 2;
  const std::vector<int64_t> sent = Run(20 * kS, 4 * kS, false);
  CHECK(sent == std::vector<int64_t>{0, 2 * kS + kHalf, 6 * kS + kHalf, 10 * kS + kHalf,
                                     14 * kS + kHalf, 18 * kS + kHalf});
  // A sign of life at least every 2.5 s: batches at 4 s, 8 s, ... and the health between them.
  // Batches every 3 s: still one health per batch; every 2 s: none but the 5 s one.
  CHECK(Run(9 * kS, 3 * kS, false) ==
        std::vector<int64_t>{0, 2 * kS + kHalf, 5 * kS + kHalf, 8 * kS + kHalf});
  CHECK(Run(11 * kS, 2 * kS, false) == std::vector<int64_t>{0, 5 * kS, 10 * kS});
}

TEST_CASE("no batches: health every 2.5 s") {
  const std::vector<int64_t> sent = Run(8 * kS, 0, false);
  CHECK(sent == std::vector<int64_t>{0, 2500 * kMs, 5 * kS, 7500 * kMs});
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

}  // namespace
}  // namespace stagefrontier
