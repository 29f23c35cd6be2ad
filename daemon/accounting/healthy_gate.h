// Verdict step 2: the noise gate. A window is HEALTHY outright when too few steps carried
// excess or the excess is a negligible share of the exposed time.
//
//   if (WithinNoise(table, config)) return healthy;
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_HEALTHY_GATE_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_HEALTHY_GATE_H_

#include "daemon/accounting/engine_config.h"
#include "daemon/accounting/excess_table.h"

namespace stagefrontier {

inline bool WithinNoise(const ExcessTable& table, const EngineConfig& config) {
  return table.flagged_steps < config.min_flagged_steps ||
         table.total < config.healthy_fraction * static_cast<double>(table.exposed_ns);
}

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_HEALTHY_GATE_H_
