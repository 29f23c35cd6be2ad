// Tunables of the accounting engine. The defaults are the ones the scenario tests and the
// hidden-rank table were run with (docs/accounting.md explains each).
//
//   EngineConfig config;
//   config.window_steps = 200;   // verdicts over 200 steps instead of 100
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_ENGINE_CONFIG_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_ENGINE_CONFIG_H_

#include <cstdint>

#include "absl/status/status.h"

namespace stagefrontier {

struct EngineConfig {
  // Steps per verdict window.
  int window_steps = 100;
  // Unflagged steps kept by each stage's rolling baseline.
  int baseline_steps = 64;
  // Unflagged steps a stage needs before its temporal baseline is trusted.
  int warmup_steps = 16;
  // An excess counts when it is above excess_z noise scales...
  double excess_z = 4.0;
  // ...and above this fraction of the median exposed step time.
  double min_excess_fraction = 0.01;
  // Ranks within tie_z noise scales of each other at a boundary tie.
  double tie_z = 3.0;
  // A rank's stage duration is a peer outlier above outlier_z + sqrt(2 ln R) noise scales
  // (the sqrt term is where the maximum of R healthy ranks normally lands).
  double outlier_z = 3.0;
  // Noise scales never go below these (clock granularity, scheduling jitter).
  int64_t noise_floor_ns = 20'000;
  double relative_noise_floor = 0.002;
  // A window is HEALTHY when fewer than min_flagged_steps steps carry excess, or the excess
  // is below healthy_fraction of the window's exposed time.
  int min_flagged_steps = 3;
  double healthy_fraction = 0.002;
  // Any other supported candidate (see rank_z_support) holding split_share makes a verdict
  // SPLIT; a supported co-leader in the same stage holding tie_ratio of the top cell makes it
  // a TIE. clear_share is accepted and validated for configuration compatibility but no
  // longer decides: on real runs the rest of the excess is noise spread over many cells, so
  // the rank evidence, not the top cell's share, tells a single fault from several.
  double clear_share = 0.5;
  double split_share = 0.2;
  double tie_ratio = 0.5;
  // Rank evidence (rank_evidence.h) a rank-targeted verdict needs: a (stage, rank) whose
  // window shift against its peers is at least rank_z_support standard errors and
  // rank_material_fraction of the median exposed step backs the frontier's suspect (for a
  // recurring fault, kRecurrenceMaterial times that in the steps it hits: its outlier steps'
  // mean excess, when their outlier z reaches rank_z_strong); one at rank_z_strong standard errors
  // names the rank on its own (the frontier charged the ranks that waited for it). Without support
  // the excess is group-wide: an AMBIGUOUS TIE marked group_wide when the window's median exposed
  // step is group_material_fraction above the baseline and group_spread_z robust standard
  // deviations (1.4826 x MAD) of the window's own exposed steps, else HEALTHY. The spread test
  // keeps a machine's ordinary drift, which on shared cores stays within a step-to-step jitter of
  // 10-30%, from reading as an event.
  double rank_z_support = 3.0;
  double rank_z_strong = 5.0;
  double rank_material_fraction = 0.02;
  double group_material_fraction = 0.05;
  double group_spread_z = 2.0;
  // A (stage, rank) the previous window named CLEAR stays named while its evidence holds at
  // rank_z_support (mean or outlier test) with a material cost, without the rank_z_strong a
  // first naming needs: an intermittent fault that struck less often in this window is still
  // the same fault, and a user reading the latest window should not see it vanish. Off: every
  // window decides alone.
  bool carry_clear = true;
  // A cell named on the recurring-fault test alone (rare outlier steps, a mean shift short of
  // rank_z_strong) must also have held at support level in the window before: an injected or
  // real intermittent fault shows window after window, while a healthy rank that a busy core
  // descheduled more than its peers shows in one window (the false alarms of docs/results.md,
  // "Session 23", each alone; the recorded faults in consecutive windows). A group's first
  // window has no window before: there the test alone decides. Off: it does everywhere.
  bool confirm_recurring = true;
  // When the largest charged cell is unsupported and nothing is strong, a charged cell the
  // window before confirms names the rank: supported here and held there, or a mean shift
  // that leans (material, z >= 2) in both windows at kPersistZ combined (top_cell.h). The case:
  // a tensor-parallel job's intermittent bwd fault, whose tensor group's all-reduces vary by
  // more than the fault's mean cost, so the frontier's largest cell is noise while the faulty
  // cell stands at z 2.5-3.5 window after window (docs/results.md, "Session 24"). Off: the
  // excess is the group's.
  bool confirm_supported = true;
  // KS divergence compares each rank with at most this many peers (evenly spread).
  int ks_max_peers = 32;
  // KS divergence is computed for every rank up to this world size, above it only for the
  // suspects' ranks and the 3-sigma outliers.
  int ks_all_ranks_limit = 1024;

  // Checks ranges (positive windows, shares in (0, 1], ...). InvalidArgument names the field.
  [[nodiscard]] absl::Status Validate() const;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_ENGINE_CONFIG_H_
