#include "daemon/sidecar/health_cadence.h"

#include <algorithm>
#include <climits>

#include "daemon/sidecar/batch_hold.h"

namespace stagefrontier {

void HealthCadence::Start(int64_t now_ns) {
  started_ = true;
  last_any_ns_ = now_ns;
  last_health_ns_ = now_ns;
}

void HealthCadence::Sent(int64_t now_ns, bool health) {
  last_any_ns_ = std::max(last_any_ns_, now_ns);
  if (health) last_health_ns_ = std::max(last_health_ns_, now_ns);
}

int64_t HealthCadence::NextNs(bool stage_open_long, bool news, bool urgent) const {
  if (!started_) return INT64_MAX;
  if (urgent) {
    return last_health_ns_ + std::min(options_.urgent_every_ns, options_.stalled_every_ns);
  }
  if (stage_open_long || news) return last_health_ns_ + options_.stalled_every_ns;
  return std::min(last_any_ns_ + options_.quiet_after_ns, last_health_ns_ + options_.max_gap_ns);
}

bool HealthCadence::RidesBatch(int64_t now_ns, int64_t next_batch_within_ns, bool stage_open_long,
                               bool news, bool urgent) const {
  // Due now for any reason: in the batch rather than alone beside it.
  if (Due(now_ns, stage_open_long, news, urgent)) return true;
  // Early only for liveness (the quiet and max-gap bounds): the stall, news and urgent cadences
  // are also caps on how often health goes (a slot's user can flip a capture answer at every
  // poll), and a report sent before them would break them.
  HealthCadence after = *this;
  after.Sent(now_ns, /*health=*/false);  // the batch itself
  const int64_t due = after.NextNs(/*stage_open_long=*/false);
  return due != INT64_MAX && due - now_ns <= next_batch_within_ns;
}

HealthCadenceOptions CadenceFor(const HealthCadenceOptions& configured,
                                const v1::StreamLimits* limits) {
  HealthCadenceOptions cap = kPredatingCoordinator;
  if (limits != nullptr) {
    constexpr int64_t kMs = 1'000'000;
    constexpr int64_t kDayMs = 86'400'000;  // beyond any limit; keeps the products in range
    const int64_t silent_ms = std::min(limits->silent_after_ms(), kDayMs);
    const int64_t idle_ms = std::min(limits->idle_timeout_ms(), kDayMs);
    // A silence limit under 350 ms (none a coordinator sets) still leaves the sidecar 100 ms.
    cap.quiet_after_ns = silent_ms > 0 ? std::max<int64_t>(silent_ms - 250, 100) * kMs : INT64_MAX;
    cap.stalled_every_ns = cap.quiet_after_ns;
    if (limits->step_deadline_ms() > 0 && cap.quiet_after_ns != INT64_MAX) {
      // A coordinator that says its step deadline looks at silence only in a stall (then the
      // stall cadence above applies): between batches the sidecar may be silent for its
      // longest hold and half a second (batch_hold.h HoldFor).
      const int64_t hold_ns = HoldFor({}, limits).max_hold_ns;
      cap.quiet_after_ns = std::max(cap.quiet_after_ns, hold_ns + 500 * kMs);
    }
    cap.max_gap_ns = idle_ms > 0 ? std::max<int64_t>(idle_ms / 2, 100) * kMs : INT64_MAX;
  }
  HealthCadenceOptions out = configured;
  out.stalled_every_ns = std::min(out.stalled_every_ns, cap.stalled_every_ns);
  out.quiet_after_ns = std::min(out.quiet_after_ns, cap.quiet_after_ns);
  out.max_gap_ns = std::min(out.max_gap_ns, cap.max_gap_ns);
  return out;
}

std::string HealthNews(v1::Health health) {
  for (v1::SlotHealth& s : *health.mutable_slots()) {
    s.clear_records_read();
    // A released slot's last records read (pending 0) is when the coordinator takes the rank
    // for finished: news; a stepping rank's pending comes and goes at every step.
    if (s.owner() == "none") {
      s.set_pending(std::min<uint64_t>(s.pending(), 1));
    } else {
      s.clear_pending();
    }
    s.clear_probe_intervals();
    // Positions go by the stall cadence (a stage open past the threshold), not as news.
    s.clear_open_known();
    s.clear_open_step();
    s.clear_open_stage();
    s.clear_open_age_ns();
  }
  std::string out;
  health.SerializeToString(&out);
  return out;
}

}  // namespace stagefrontier
