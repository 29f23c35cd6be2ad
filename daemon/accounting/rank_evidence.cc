#include "daemon/accounting/rank_evidence.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <vector>

#include "daemon/accounting/robust_stats.h"

namespace stagefrontier {

namespace {

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

// One usable step's stage deviations: member m's duration of stage k less the step's median
// of it over the present members (which the frontier kept), times the stage's sign.
// With two members present their median is their mean: each deviates by half the gap.
// Against the other member alone (the peer a rank is compared with), the gap counts whole, as
// in the what-if (PeerDurationNs); the spread doubles alike, so z does not change, but the
// shift the text reports and the materiality test see the real gap. Durations are below a day
// (shm/record_limits.h): exact in a double.
class StepDeviations {
 public:
  StepDeviations(const AccountingWindow& window, const UsableStep& usable)
      : step_(window.at(usable.index)),
        stages_(window.stages()),
        scale_(usable.present == 2 ? 2 : 1) {}
  // Whether stage k was accounted in the step (a step may carry fewer than the schema).
  bool has(int k) const { return static_cast<int>(step_.accounting.stages.size()) > k; }
  bool present(int m) const { return step_.present[m] != 0; }
  int64_t of(int m, int k, int64_t sign) const {
    return scale_ * sign *
           (step_.durations[static_cast<size_t>(m) * stages_ + k] -
            step_.accounting.stages[k].median_duration_ns);
  }

 private:
  const WindowStep& step_;
  const int stages_;
  const int64_t scale_;
};

// One stage's figures over the usable steps: the outlier test's limit from the pooled
// deviations (kOutlierScales robust scales beyond their median), then, from the members' sums,
// the median member's mean deviation and the pooled within-member spread.
struct StageFigures {
  int64_t sign = 1;
  bool outlier_test = false;
  int64_t pooled_median = 0;
  double limit = 0;
  double center = 0;
  double sd = 0;
};

// One member's deviations in one stage: their sums, and the steps beyond the stage's outlier
// limit with the sum of their deviations beyond the pooled median.
struct MemberSums {
  double sum = 0;
  double sum_sq = 0;
  double excess_sum = 0;
  int32_t count = 0;
  int32_t outliers = 0;
};

// Every member's sums, member-major: a member's stages lie together, as its durations do, so
// that one walk of the window fills them all.
class SumsTable {
 public:
  SumsTable(int stages, int members)
      : stages_(stages), members_(members), cells_(static_cast<size_t>(stages) * members) {}
  MemberSums* row(int m) { return &cells_[static_cast<size_t>(m) * stages_]; }
  const MemberSums& at(int k, int m) const { return cells_[static_cast<size_t>(m) * stages_ + k]; }
  int members() const { return members_; }

 private:
  int stages_;
  int members_;
  std::vector<MemberSums> cells_;
};

// Stage k's deviations over the usable steps into `out` (room for every member of every usable
// step), in step then member order (the median and MAD need none); returns how many.
size_t PoolDeviations(const AccountingWindow& window, const std::vector<UsableStep>& usable, int k,
                      int64_t sign, int64_t* out) {
  size_t n = 0;
  for (const UsableStep& u : usable) {
    const StepDeviations step(window, u);
    if (!step.has(k)) continue;
    // Written for every member, kept for the present ones: no branch to mispredict.
    for (int m = 0; m < window.members(); ++m) {
      out[n] = step.of(m, k, sign);
      n += step.present(m) ? 1 : 0;
    }
  }
  return n;
}

// The outlier limit from the pooled deviations (order-free: taken in place, `pooled` spent).
void SetOutlierLimit(std::span<int64_t> pooled, StageFigures* d) {
  d->pooled_median = MedianInPlace(pooled);
  const double scale = kMadToSigma * static_cast<double>(MadInPlace(pooled, d->pooled_median));
  d->outlier_test = scale > 0;
  d->limit = static_cast<double>(d->pooled_median) + kOutlierScales * scale;
}

// Every stage's sums and outliers in one walk of the window, each member's in step order.
void SumAndCount(const AccountingWindow& window, const std::vector<UsableStep>& usable,
                 const std::vector<StageFigures>& stages, SumsTable* sums) {
  const int stage_count = static_cast<int>(stages.size());
  for (const UsableStep& u : usable) {
    const StepDeviations step(window, u);
    for (int m = 0; m < window.members(); ++m) {
      if (!step.present(m)) continue;
      MemberSums* row = sums->row(m);
      for (int k = 0; k < stage_count; ++k) {
        const StageFigures& d = stages[k];
        if (!step.has(k)) continue;
        const int64_t dev = step.of(m, k, d.sign);
        MemberSums& c = row[k];
        c.sum += static_cast<double>(dev);
        c.sum_sq += static_cast<double>(dev) * static_cast<double>(dev);
        ++c.count;
        if (d.outlier_test && static_cast<double>(dev) > d.limit) {
          ++c.outliers;
          c.excess_sum += static_cast<double>(dev - d.pooled_median);
        }
      }
    }
  }
}

// Stage k's median member mean deviation and pooled within-member spread into `d`; false with
// fewer than two members to compare.
bool CenterAndSpread(int k, const SumsTable& sums, StageFigures* d, std::vector<double>* means) {
  means->clear();
  double within = 0;
  int64_t dof = 0;
  for (int m = 0; m < sums.members(); ++m) {
    const MemberSums& c = sums.at(k, m);
    if (c.count == 0) continue;
    const double mean = c.sum / c.count;
    means->push_back(mean);
    within += std::max(0.0, c.sum_sq - c.count * mean * mean);
    dof += c.count - 1;
  }
  if (means->size() < 2) return false;
  std::sort(means->begin(), means->end());
  const size_t half = means->size() / 2;
  d->center = means->size() % 2 == 1 ? (*means)[half] : ((*means)[half - 1] + (*means)[half]) / 2;
  d->sd = dof > 0 ? std::sqrt(within / static_cast<double>(dof)) : 0.0;
  return true;
}

// Fills stage k's cells: shift against the median member's mean, its z over the pooled
// within-member spread, and the outlier test against the other members' rate.
void FillStage(int k, const StageFigures& d, const SumsTable& sums, RankEvidenceTable* table) {
  const int n = table->members();
  int64_t all_outliers = 0, all_steps = 0;
  for (int m = 0; m < n; ++m) {
    all_outliers += sums.at(k, m).outliers;
    all_steps += sums.at(k, m).count;
  }
  for (int m = 0; m < n; ++m) {
    RankEvidence& e = table->at(k, m);
    const MemberSums& c = sums.at(k, m);
    const int32_t count = c.count;
    const int32_t outliers = c.outliers;
    e.steps = count;
    if (count == 0) continue;
    e.shift_ns = c.sum / count - d.center;
    e.outlier_steps = outliers;
    if (outliers > 0) e.outlier_excess_ns = c.excess_sum / outliers;
    const int64_t other_steps = all_steps - count;
    if (other_steps > 0 && outliers >= kMinOutlierSteps) {
      // The others' rate, floored at one outlier in their steps: never a zero variance.
      const double p = std::max<double>(1.0, static_cast<double>(all_outliers - outliers)) /
                       static_cast<double>(other_steps);
      const double expect = p * count;
      e.outlier_z = (outliers - expect) / std::sqrt(std::max(1e-9, expect * (1 - p)));
    }
    e.z = d.sd > 0 && count >= 2 ? e.shift_ns * std::sqrt(static_cast<double>(count)) / d.sd : 0.0;
  }
}

}  // namespace

// Each stage's pooled deviations are gathered in turn (one buffer, sized once, for the
// medians); one walk of the window then sums every stage's deviations and counts its outliers.
RankEvidenceTable ComputeRankEvidence(const AccountingWindow& window, const StageSchema& schema) {
  const int n = window.members();
  const int stages = window.stages();
  RankEvidenceTable table(stages, n);
  if (n < 2) return table;
  const std::vector<UsableStep> usable = UsableSteps(window);
  // Not zeroed: each stage writes what it reads.
  const std::unique_ptr<int64_t[]> pooled =
      std::make_unique_for_overwrite<int64_t[]>(usable.size() * static_cast<size_t>(n));
  std::vector<StageFigures> by_stage(static_cast<size_t>(stages));
  for (int k = 0; k < stages; ++k) {
    StageFigures& d = by_stage[k];
    d.sign = schema.IsWait(static_cast<size_t>(k)) ? -1 : 1;
    const size_t count = PoolDeviations(window, usable, k, d.sign, pooled.get());
    if (count > 0) SetOutlierLimit(std::span<int64_t>(pooled.get(), count), &d);
  }
  SumsTable sums(stages, n);
  SumAndCount(window, usable, by_stage, &sums);
  std::vector<double> means;
  for (int k = 0; k < stages; ++k) {
    if (CenterAndSpread(k, sums, &by_stage[k], &means)) FillStage(k, by_stage[k], sums, &table);
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
