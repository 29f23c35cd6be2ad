#include "daemon/accounting/step_accounting.h"

namespace stagefrontier {

const char* AttributionKindName(AttributionKind kind) {
  switch (kind) {
    case AttributionKind::kFrontierLeader:
      return "frontier_leader";
    case AttributionKind::kCarryOver:
      return "carry_over";
    case AttributionKind::kLateStart:
      return "late_start";
    case AttributionKind::kGroupWait:
      return "group_wait";
    case AttributionKind::kMixedUnresolved:
      return "mixed_unresolved";
    case AttributionKind::kProbeResolved:
      return "probe_resolved";
  }
  return "unknown";
}

}  // namespace stagefrontier
