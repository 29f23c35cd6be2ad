// A report over one rank set's current window: the verdict, the per-stage frontier
// waterfall beside what the mean and max dashboards would show, and KAIR's corroborating
// statistics (rank divergence, 3-sigma outliers).
//
//   GroupReport r = accountant.Report();
//   printf("mean dashboard points at %s\n", schema.stage(r.mean_top_stage).name.c_str());
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_REPORT_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_REPORT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "daemon/accounting/verdict.h"

namespace stagefrontier {

struct StageSummary {
  double mean_increment_ns = 0;  // mean ΔF[k] over the window
  double baseline_ns = -1;       // current rolling baseline of ΔF[k]; -1 while warming
  double mean_excess_ns = 0;     // excess charged to this stage, per step
  std::vector<std::pair<int32_t, int32_t>> top_leaders;  // (rank, steps it led), most first
  int32_t first_excess_steps = 0;  // steps whose delay first appeared in this stage
  double mean_dashboard_ns = 0;    // mean over steps of the mean over ranks of d[k]
  double mean_dashboard_baseline_ns = -1;
  double max_dashboard_ns = 0;  // mean over steps of the max over ranks of d[k]
  double max_dashboard_baseline_ns = -1;
};

struct RankDivergence {
  int32_t rank = 0;
  int32_t stage = 0;  // the stage where this rank diverges most
  double ks = 0;      // mean KS distance from its peers in that stage
};

struct StageOutlier {
  int32_t stage = 0;
  int32_t rank = 0;
  double fraction = 0;  // of the window's steps where d > peer median + 3 sigma
};

struct GroupReport {
  std::string group;
  std::vector<int32_t> ranks;
  Verdict verdict;
  std::vector<StageSummary> stages;
  double mean_exposed_ns = 0;       // per step
  double mean_sum_of_max_ns = 0;    // per step: what the max dashboard's stages add up to
  int32_t frontier_top_stage = -1;  // stage holding the most attributed excess
  int32_t mean_top_stage = -1;      // stage the mean dashboard shows growing most; -1 if unknown
  int32_t max_top_stage = -1;       // likewise for the max dashboard
  std::vector<RankDivergence> divergence;  // largest first
  bool divergence_all_ranks = true;        // false: only suspects and outliers were computed
  std::vector<StageOutlier> outliers;      // fraction >= 0.1, largest first
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_REPORT_H_
