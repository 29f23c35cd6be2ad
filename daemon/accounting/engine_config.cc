#include "daemon/accounting/engine_config.h"

#include "absl/strings/str_cat.h"

namespace stagefrontier {

namespace {
absl::Status Bad(const char* field, double value, const char* rule) {
  return absl::InvalidArgumentError(
      absl::StrCat("engine config: ", field, " = ", value, " ", rule));
}
}  // namespace

absl::Status EngineConfig::Validate() const {
  if (window_steps < 2 || window_steps > 100000)
    return Bad("window_steps", window_steps, "must be in [2, 100000]");
  if (baseline_steps < 4 || baseline_steps > 100000)
    return Bad("baseline_steps", baseline_steps, "must be in [4, 100000]");
  if (warmup_steps < 1 || warmup_steps > baseline_steps)
    return Bad("warmup_steps", warmup_steps, "must be in [1, baseline_steps]");
  // Every bound also refuses NaN and infinities (a threshold of inf or 1e308 disables the
  // detector without saying so).
  if (!(excess_z > 0 && excess_z <= 1000)) return Bad("excess_z", excess_z, "must be in (0, 1000]");
  if (!(tie_z > 0 && tie_z <= 1000)) return Bad("tie_z", tie_z, "must be in (0, 1000]");
  if (!(outlier_z > 0 && outlier_z <= 1000))
    return Bad("outlier_z", outlier_z, "must be in (0, 1000]");
  if (!(min_excess_fraction >= 0 && min_excess_fraction < 1))
    return Bad("min_excess_fraction", min_excess_fraction, "must be in [0, 1)");
  if (noise_floor_ns < 0 || noise_floor_ns > 3'600'000'000'000)
    return Bad("noise_floor_ns", static_cast<double>(noise_floor_ns), "must be in [0, 1 hour]");
  if (!(relative_noise_floor >= 0 && relative_noise_floor < 1))
    return Bad("relative_noise_floor", relative_noise_floor, "must be in [0, 1)");
  if (min_flagged_steps < 1) return Bad("min_flagged_steps", min_flagged_steps, "must be >= 1");
  if (!(healthy_fraction >= 0 && healthy_fraction < 1))
    return Bad("healthy_fraction", healthy_fraction, "must be in [0, 1)");
  if (!(clear_share > 0 && clear_share <= 1))
    return Bad("clear_share", clear_share, "must be in (0, 1]");
  if (!(split_share > 0 && split_share <= 1))
    return Bad("split_share", split_share, "must be in (0, 1]");
  if (!(rank_z_support >= 0 && rank_z_support <= 100))
    return Bad("rank_z_support", rank_z_support, "must be in [0, 100]");
  if (!(rank_z_strong >= rank_z_support && rank_z_strong <= 100))
    return Bad("rank_z_strong", rank_z_strong, "must be in [rank_z_support, 100]");
  if (!(rank_material_fraction >= 0 && rank_material_fraction < 1))
    return Bad("rank_material_fraction", rank_material_fraction, "must be in [0, 1)");
  if (!(group_material_fraction >= 0 && group_material_fraction < 1))
    return Bad("group_material_fraction", group_material_fraction, "must be in [0, 1)");
  if (!(group_spread_z >= 0 && group_spread_z <= 100))
    return Bad("group_spread_z", group_spread_z, "must be in [0, 100]");
  if (!(tie_ratio > 0 && tie_ratio <= 1)) return Bad("tie_ratio", tie_ratio, "must be in (0, 1]");
  if (ks_max_peers < 1 || ks_max_peers > 100000)
    return Bad("ks_max_peers", ks_max_peers, "must be in [1, 100000]");
  if (ks_all_ranks_limit < 0) return Bad("ks_all_ranks_limit", ks_all_ranks_limit, "must be >= 0");
  return absl::OkStatus();
}

}  // namespace stagefrontier
