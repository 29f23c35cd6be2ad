#include "daemon/nodes/node_class.h"

#include "absl/strings/str_cat.h"

namespace stagefrontier {

const char* NodeClassName(NodeClass c) {
  switch (c) {
    case NodeClass::kHealthy:
      return "healthy";
    case NodeClass::kTransient:
      return "transient";
    case NodeClass::kChronic:
      return "chronic";
  }
  return "healthy";
}

absl::Status NodeClassConfig::Validate() const {
  if (!(lambda > 0 && lambda <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("node lambda ", lambda, " not in (0, 1]"));
  }
  if (!(chronic_exit > 0 && chronic_exit < chronic_enter && chronic_enter <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("node chronic thresholds: need 0 < exit (",
                                                   chronic_exit, ") < enter (", chronic_enter,
                                                   ") <= 1"));
  }
  if (!(charge_share > 0 && charge_share <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("node charge share ", charge_share, " not in (0, 1]"));
  }
  if (min_charged_windows < 1 || transient_memory_windows < 1) {
    return absl::InvalidArgumentError("node window counts must be >= 1");
  }
  return absl::OkStatus();
}

bool NodeClassTracker::Observe(bool charged, const NodeClassConfig& config) {
  ++windows_;
  ewma_ = (1 - config.lambda) * ewma_ + config.lambda * (charged ? 1.0 : 0.0);
  if (charged) {
    ++charged_windows_;
    if (!last_charged_) ++episodes_;
    since_charge_ = 0;
  } else if (since_charge_ >= 0) {
    ++since_charge_;
  }
  last_charged_ = charged;

  const NodeClass before = cls_;
  const bool chronic =
      cls_ == NodeClass::kChronic
          ? ewma_ >= config.chronic_exit
          : ewma_ >= config.chronic_enter && charged_windows_ >= config.min_charged_windows;
  if (chronic) {
    cls_ = NodeClass::kChronic;
  } else if (since_charge_ >= 0 && since_charge_ < config.transient_memory_windows) {
    cls_ = NodeClass::kTransient;
  } else {
    cls_ = NodeClass::kHealthy;
  }
  return cls_ != before;
}

}  // namespace stagefrontier
