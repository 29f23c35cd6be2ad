#include "daemon/accounting/rank_evidence.h"

#include <algorithm>
#include <cmath>

#include "daemon/accounting/robust_stats.h"

namespace stagefrontier {

namespace {

// One stage's deviations from each step's median, over the usable steps: per member sums, and
// the pooled list (in step then member order) with the member of each entry.
struct StageDeviations {
  explicit StageDeviations(int n) : sum(n), sum_sq(n), count(n) {}
  std::vector<double> sum, sum_sq;
  std::vector<int32_t> count;
  std::vector<int64_t> devs;
  std::vector<int32_t> who;
};

// Per member: steps beyond kOutlierScales robust scales of the pooled deviations, and the sum
// of their deviations beyond the pooled median.
struct OutlierCounts {
  explicit OutlierCounts(int n) : steps(n), excess_sum(n) {}
  std::vector<int32_t> steps;
  std::vector<double> excess_sum;
};

// A window step with peers to compare with: at least two members present.
struct UsableStep {
  size_t index;
  int present;
};

std::vector<UsableStep> UsableSteps(const AccountingWindow& window) {
  std::vector<UsableStep> usable;
  for (size_t i = 0; i < window.size(); ++i) {
    int present = 0;
    for (int m = 0; m < window.members(); ++m) present += window.present(i, m) ? 1 : 0;
    if (present >= 2) usable.push_back({i, present});
  }
  return usable;
}

void CollectDeviations(const AccountingWindow& window, const std::vector<UsableStep>& usable, int k,
                       int64_t sign, StageDeviations* d) {
  std::fill(d->sum.begin(), d->sum.end(), 0.0);
  std::fill(d->sum_sq.begin(), d->sum_sq.end(), 0.0);
  std::fill(d->count.begin(), d->count.end(), 0);
  d->devs.clear();
  d->who.clear();
  for (const auto [i, present] : usable) {
    const WindowStep& step = window.at(i);
    if (static_cast<int>(step.accounting.stages.size()) <= k) continue;
    // The frontier kept this step's median duration of the stage over present members.
    const int64_t median = step.accounting.stages[k].median_duration_ns;
    // With two members present their median is their mean: each deviates by half the gap.
    // Against the other member alone (the peer a rank is compared with), the gap counts whole,
    // as in the what-if (PeerDurationNs); the spread doubles alike, so z does not change, but
    // the shift the text reports and the materiality test see the real gap.
    const int64_t scale = present == 2 ? 2 : 1;
    for (int m = 0; m < window.members(); ++m) {
      if (!window.present(i, m)) continue;
      // Durations are below a day (shm/record_limits.h): exact in a double.
      const int64_t dev = scale * sign * (window.duration(i, m, k) - median);
      d->devs.push_back(dev);
      d->who.push_back(m);
      d->sum[m] += static_cast<double>(dev);
      d->sum_sq[m] += static_cast<double>(dev) * static_cast<double>(dev);
      ++d->count[m];
    }
  }
}

void CountOutliers(const StageDeviations& d, std::vector<int64_t>* pooled, OutlierCounts* o) {
  *pooled = d.devs;
  const int64_t pooled_median = MedianInPlace(*pooled);
  const double scale = kMadToSigma * static_cast<double>(MadInPlace(*pooled, pooled_median));
  std::fill(o->steps.begin(), o->steps.end(), 0);
  std::fill(o->excess_sum.begin(), o->excess_sum.end(), 0.0);
  const double limit = static_cast<double>(pooled_median) + kOutlierScales * scale;
  for (size_t e = 0; e < d.devs.size() && scale > 0; ++e) {
    if (static_cast<double>(d.devs[e]) > limit) {
      ++o->steps[d.who[e]];
      o->excess_sum[d.who[e]] += static_cast<double>(d.devs[e] - pooled_median);
    }
  }
}

// Fills stage k's cells: shift against the median member's mean, its z over the pooled
// within-member spread, and the outlier test against the other members' rate.
void FillStage(int k, const StageDeviations& d, const OutlierCounts& o, double center, double sd,
               RankEvidenceTable* table) {
  const int n = table->members();
  int64_t all_outliers = 0, all_steps = 0;
  for (int m = 0; m < n; ++m) {
    all_outliers += o.steps[m];
    all_steps += d.count[m];
  }
  for (int m = 0; m < n; ++m) {
    RankEvidence& e = table->at(k, m);
    const int32_t count = d.count[m];
    const int32_t outliers = o.steps[m];
    e.steps = count;
    if (count == 0) continue;
    e.shift_ns = d.sum[m] / count - center;
    e.outlier_steps = outliers;
    if (outliers > 0) e.outlier_excess_ns = o.excess_sum[m] / outliers;
    const int64_t other_steps = all_steps - count;
    if (other_steps > 0 && outliers >= kMinOutlierSteps) {
      // The others' rate, floored at one outlier in their steps: never a zero variance.
      const double p = std::max<double>(1.0, static_cast<double>(all_outliers - outliers)) /
                       static_cast<double>(other_steps);
      const double expect = p * count;
      e.outlier_z = (outliers - expect) / std::sqrt(std::max(1e-9, expect * (1 - p)));
    }
    e.z = sd > 0 && count >= 2 ? e.shift_ns * std::sqrt(static_cast<double>(count)) / sd : 0.0;
  }
}

}  // namespace

RankEvidenceTable ComputeRankEvidence(const AccountingWindow& window, const StageSchema& schema) {
  const int n = window.members();
  const int stages = window.stages();
  RankEvidenceTable table(stages, n);
  if (n < 2) return table;
  const std::vector<UsableStep> usable = UsableSteps(window);
  StageDeviations d(n);
  OutlierCounts o(n);
  std::vector<double> means;
  std::vector<int64_t> pooled;
  for (int k = 0; k < stages; ++k) {
    const int64_t sign = schema.IsWait(static_cast<size_t>(k)) ? -1 : 1;
    CollectDeviations(window, usable, k, sign, &d);
    means.clear();
    double within = 0;
    int64_t dof = 0;
    for (int m = 0; m < n; ++m) {
      if (d.count[m] == 0) continue;
      const double mean = d.sum[m] / d.count[m];
      means.push_back(mean);
      within += std::max(0.0, d.sum_sq[m] - d.count[m] * mean * mean);
      dof += d.count[m] - 1;
    }
    if (means.size() < 2) continue;
    std::sort(means.begin(), means.end());
    const size_t half = means.size() / 2;
    const double center = means.size() % 2 == 1 ? means[half] : (means[half - 1] + means[half]) / 2;
    CountOutliers(d, &pooled, &o);
    const double sd = dof > 0 ? std::sqrt(within / static_cast<double>(dof)) : 0.0;
    FillStage(k, d, o, center, sd, &table);
  }
  return table;
}

}  // namespace stagefrontier

namespace stagefrontier {

bool RankSupport::Evident(int stage, int member, double z_min, double recurring_z_min) const {
  return EvidentIn(stage, member, z_min, recurring_z_min, /*confirm=*/true);
}

bool RankSupport::Recurs(const RankEvidence& e, double outlier_z_min) const {
  return e.shift_ns > 0 && e.outlier_z >= outlier_z_min &&
         e.outlier_excess_ns >= kRecurrenceMaterial * th_.material_ns;
}

double RankSupport::ShiftWithoutSpikes(const RankEvidence& e) const {
  // A few isolated spikes (fewer than kMinOutlierSteps) are not a slow rank: its shift must
  // stay material without them.
  const double spikes = e.outlier_steps < kMinOutlierSteps && e.steps > 0
                            ? e.outlier_steps * e.outlier_excess_ns / e.steps
                            : 0.0;
  return e.shift_ns - spikes;
}

bool RankSupport::Leans(int stage, int member) const {
  const RankEvidence& e = table_.at(stage, member);
  return e.z >= kLeanZ && ShiftWithoutSpikes(e) >= th_.material_ns;
}

bool RankSupport::Held(int stage, int member) const {
  return EvidentIn(stage, member, th_.z_support, th_.z_support, /*confirm=*/false) ||
         Recurs(table_.at(stage, member), th_.z_support);
}

bool RankSupport::Confirmed(int stage, int member) const {
  return confirmed_ == nullptr || Contains(*confirmed_, {stage, member});
}

bool RankSupport::EvidentIn(int stage, int member, double z_min, double recurring_z_min,
                            bool confirm) const {
  const RankEvidence& e = table_.at(stage, member);
  if (std::max(e.z, e.outlier_z) >= z_min && ShiftWithoutSpikes(e) >= th_.material_ns) {
    return true;
  }
  // A recurring fault: its rare steps dilute the mean test, so its strength is the outlier
  // test's, with the mean shift at least at the support level; below rank_z_strong the cell
  // must also have held in the window before (EngineConfig::confirm_recurring).
  return e.z >= th_.z_support && Recurs(e, recurring_z_min) &&
         (!confirm || e.z >= th_.z_strong || Confirmed(stage, member));
}

bool RankSupport::Supported(int stage, int member) const {
  switch (schema_.stage(stage).kind) {
    case StageKind::kMixed:
      return true;
    case StageKind::kP2p:
      // A transfer lasts as long as its neighbour makes it: never the rank's own evidence (a
      // last stage's recv_act, long in 5 steps its upstream neighbour hiccupped, read CLEAR).
      return false;
    default:
      return Evident(stage, member, th_.z_support, th_.z_strong);
  }
}

bool RankSupport::SupportedAnywhere(int member) const {
  for (int k = 0; k < table_.stages(); ++k) {
    // A transfer's or tensor collective's duration is the ranks it waits on outside the group:
    // another rank late there is not a second delay beside the top cell.
    if (schema_.WaitsOutsideGroup(static_cast<size_t>(k))) continue;
    // Nor is a long wait in a collective: the rank arrived early there. (A collective over the
    // whole job, where a pipeline stage's group waits for the others, made its waiting ranks
    // rivals of a straggler: AMBIGUOUS CONCURRENT in 4 of 16 real pipeline runs.)
    if (schema_.stage(k).kind == StageKind::kSync) continue;
    if (Supported(k, member)) return true;
  }
  return false;
}

bool RankSupport::StillSupported(int stage, int member) const {
  return Evident(stage, member, th_.z_support, th_.z_support) ||
         Recurs(table_.at(stage, member), th_.z_strong);
}

}  // namespace stagefrontier
