#include "daemon/sidecar/health_cadence.h"

#include <algorithm>
#include <climits>

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

int64_t HealthCadence::NextNs(bool stage_open_long) const {
  if (!started_) return INT64_MAX;
  if (stage_open_long) return last_health_ns_ + options_.stalled_every_ns;
  return std::min(last_any_ns_ + options_.quiet_after_ns, last_health_ns_ + options_.max_gap_ns);
}

}  // namespace stagefrontier
