#include "daemon/accounting/rank_evidence.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
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
  // How many of the first `stages` stages the step accounted.
  int accounted(int stages) const {
    return std::min(stages, static_cast<int>(step_.accounting.stages.size()));
  }
  bool present(int m) const { return step_.present[m] != 0; }
  int64_t of(int m, int k, int64_t sign) const { return column(k, sign).at(m); }

  // Stage k of the step: at(m) is member m's deviation (of(m, k, sign)), with what every member
  // shares looked up once.
  class Column {
   public:
    Column(const int64_t* durations, int stride, int64_t median, int64_t factor)
        : durations_(durations), stride_(stride), median_(median), factor_(factor) {}
    int64_t at(int m) const {
      return factor_ * (durations_[static_cast<size_t>(m) * stride_] - median_);
    }

   private:
    const int64_t* durations_;
    int stride_;
    int64_t median_;
    int64_t factor_;
  };
  Column column(int k, int64_t sign) const {
    return Column(step_.durations.data() + k, stages_,
                  step_.accounting.stages[k].median_duration_ns, scale_ * sign);
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

// Calls f(step, k, first, end) for every usable step, every stage k it accounted and every
// block of members [first, end); f walks the block's present members itself, with what it keeps
// for stage k in registers. Each (stage, member) cell sees its steps in order, as the plain
// walk adds them. Blocks go in turn, each over every step, so that what f keeps per member (a
// SumsTable row) stays in cache.
template <typename F>
void ForEachRun(const AccountingWindow& window, const std::vector<UsableStep>& usable, int stages,
                F&& f) {
  constexpr int kBlock = 256;
  const int n = window.members();
  for (int first = 0; first < n; first += kBlock) {
    const int end = std::min(n, first + kBlock);
    for (const UsableStep& u : usable) {
      const StepDeviations step(window, u);
      const int accounted = step.accounted(stages);
      for (int k = 0; k < accounted; ++k) f(step, k, first, end);
    }
  }
}

// How many deviations stage k pools: the present members of the usable steps that accounted it.
std::vector<size_t> PooledCounts(const std::vector<UsableStep>& usable,
                                 const AccountingWindow& window, int stages) {
  std::vector<size_t> totals(static_cast<size_t>(stages), 0);
  for (const UsableStep& u : usable) {
    const int accounted = StepDeviations(window, u).accounted(stages);
    for (int k = 0; k < accounted; ++k) totals[k] += static_cast<size_t>(u.present);
  }
  return totals;
}

// Each stage's deviations at `draws` positions of the window (a usable step, a member) drawn by
// a fixed generator: the same window gives the same sample.
std::vector<std::vector<int64_t>> SampleDeviations(const AccountingWindow& window,
                                                   const std::vector<UsableStep>& usable,
                                                   const std::vector<StageFigures>& stages,
                                                   size_t draws) {
  std::vector<std::vector<int64_t>> out(stages.size());
  if (usable.empty()) return out;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (size_t d = 0; d < draws; ++d) {
    uint64_t r = (state += 0x9e3779b97f4a7c15ull);  // splitmix64
    r = (r ^ (r >> 30)) * 0xbf58476d1ce4e5b9ull;
    r = (r ^ (r >> 27)) * 0x94d049bb133111ebull;
    r ^= r >> 31;
    const StepDeviations step(window, usable[(r >> 32) % usable.size()]);
    const int m = static_cast<int>((r & 0xffffffffull) % static_cast<uint64_t>(window.members()));
    if (!step.present(m)) continue;
    const int accounted = step.accounted(static_cast<int>(stages.size()));
    for (int k = 0; k < accounted; ++k) out[k].push_back(step.of(m, k, stages[k].sign));
  }
  return out;
}

// One walk's share of an exact median: the values under `lo` counted, those in [lo, hi] kept
// (branch-free, up to a cap), those above passed over. MedianOfBand then finds it among the kept
// if it lies there.
class Bracket {
 public:
  // Keeps all of a stage's `total` values (a stage too small to bracket).
  explicit Bracket(size_t total)
      : Bracket(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                total + 1) {}
  Bracket(int64_t lo, int64_t hi, size_t cap)
      : lo_(lo), hi_(hi), cap_(cap), kept_(std::make_unique_for_overwrite<int64_t[]>(cap + 1)) {}

  // Around the middle of a stage's `total` values from a sample of them (reordered): `margin`
  // sample ranks either side, room for twice the share of the values expected inside.
  static Bracket AroundMiddle(std::vector<int64_t>& sample, size_t total,
                              const EvidenceSelection& selection) {
    if (total < selection.min_values || sample.empty()) return Bracket(total);
    const size_t at = sample.size() / 2;
    const size_t a = at > selection.margin ? at - selection.margin : 0;
    const size_t b = std::min(sample.size() - 1, at + selection.margin);
    std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(a), sample.end());
    const int64_t lo = sample[a];
    std::nth_element(sample.begin() + static_cast<std::ptrdiff_t>(a),
                     sample.begin() + static_cast<std::ptrdiff_t>(b), sample.end());
    const double share = static_cast<double>(b - a + 1) / static_cast<double>(sample.size());
    const size_t room = static_cast<size_t>(2 * share * static_cast<double>(total)) + 1024;
    return Bracket(lo, sample[b], std::min(room, total + 1));
  }

  // Adds a run of values with the bracket's counters in registers; written back at the end.
  class Adder {
   public:
    explicit Adder(Bracket& b)
        : b_(b),
          lo_(b.lo_),
          hi_(b.hi_),
          cap_(b.cap_),
          kept_(b.kept_.get()),
          below_(b.below_),
          count_(b.count_) {}
    ~Adder() {
      b_.below_ = below_;
      b_.count_ = count_;
    }
    Adder(const Adder&) = delete;
    Adder& operator=(const Adder&) = delete;
    void operator()(int64_t v) {
      below_ += v < lo_ ? 1 : 0;
      kept_[count_] = v;
      count_ += static_cast<size_t>((v >= lo_) & (v <= hi_) & (count_ < cap_));
    }

   private:
    Bracket& b_;
    const int64_t lo_;
    const int64_t hi_;
    const size_t cap_;
    int64_t* const kept_;
    size_t below_;
    size_t count_;
  };
  // The median of the `total` values added; nullopt where the bracket missed it or filled up.
  std::optional<int64_t> Median(size_t total) {
    if (count_ >= cap_) return std::nullopt;
    return MedianOfBand(std::span<int64_t>(kept_.get(), count_), below_, total);
  }
  // A floor of what the bracket holds (its median, where it holds it).
  int64_t floor() const { return lo_; }

 private:
  int64_t lo_;
  int64_t hi_;
  size_t cap_;
  std::unique_ptr<int64_t[]> kept_;
  size_t below_ = 0;
  size_t count_ = 0;
};

// The outlier limit from the pooled median and MAD.
void SetOutlierLimit(int64_t median, int64_t mad, StageFigures* d) {
  d->pooled_median = median;
  const double scale = kMadToSigma * static_cast<double>(mad);
  d->outlier_test = scale > 0;
  d->limit = static_cast<double>(median) + kOutlierScales * scale;
}

// Stage k's pooled median or MAD the plain way, where its bracket missed: every deviation
// gathered, then selected.
int64_t GatheredMedian(const AccountingWindow& window, const std::vector<UsableStep>& usable, int k,
                       const StageFigures& d, size_t total, bool mad) {
  const std::unique_ptr<int64_t[]> pooled = std::make_unique_for_overwrite<int64_t[]>(
      usable.size() * static_cast<size_t>(window.members()));
  const size_t count = PoolDeviations(window, usable, k, d.sign, pooled.get());
  const std::span<int64_t> values(pooled.get(), std::min(count, total));
  return mad ? MadInPlace(values, d.pooled_median) : MedianInPlace(values);
}

// A deviation beyond the floor of its stage's outlier limit, kept in walk order: once the limit
// is known, the cell's outliers and their excess are added in the order the plain walk adds them.
struct Candidate {
  int32_t member;
  int32_t stage;
  int64_t dev;
};

// Counts member m's deviation `dev` in stage k against the stage's limit.
void CountOutlier(int m, int k, int64_t dev, const StageFigures& d, SumsTable* sums) {
  if (!d.outlier_test || static_cast<double>(dev) <= d.limit) return;
  MemberSums& c = sums->row(m)[k];
  ++c.outliers;
  c.excess_sum += static_cast<double>(dev - d.pooled_median);
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

// The walks of one window's evidence (ComputeRankEvidence), in order: SumAndMedians,
// MadsAndCandidates, CountOutliers, Fill.
class EvidenceWalks {
 public:
  EvidenceWalks(const AccountingWindow& window, const StageSchema& schema,
                const EvidenceSelection& selection)
      : window_(window),
        selection_(selection),
        stages_(window.stages()),
        usable_(UsableSteps(window)),
        totals_(PooledCounts(usable_, window, stages_)),
        by_stage_(static_cast<size_t>(stages_)),
        sums_(stages_, window.members()) {
    for (int k = 0; k < stages_; ++k) {
      by_stage_[k].sign = schema.IsWait(static_cast<size_t>(k)) ? -1 : 1;
    }
    const bool large = *std::max_element(totals_.begin(), totals_.end()) >= selection.min_values;
    samples_ = large ? SampleDeviations(window, usable_, by_stage_, selection.sample)
                     : std::vector<std::vector<int64_t>>(static_cast<size_t>(stages_));
  }

  // The first walk: every cell's sums, and each stage's pooled median from its bracket.
  void SumAndMedians() {
    std::vector<Bracket> medians;
    for (int k = 0; k < stages_; ++k) {
      medians.push_back(Bracket::AroundMiddle(samples_[k], totals_[k], selection_));
    }
    ForEachRun(window_, usable_, stages_,
               [&](const StepDeviations& step, int k, int first, int end) {
                 const StepDeviations::Column column = step.column(k, by_stage_[k].sign);
                 Bracket::Adder add(medians[k]);
                 for (int m = first; m < end; ++m) {
                   if (!step.present(m)) continue;
                   const int64_t dev = column.at(m);
                   MemberSums& c = sums_.row(m)[k];
                   c.sum += static_cast<double>(dev);
                   c.sum_sq += static_cast<double>(dev) * static_cast<double>(dev);
                   ++c.count;
                   add(dev);
                 }
               });
    for (int k = 0; k < stages_; ++k) {
      if (totals_[k] == 0) continue;
      const std::optional<int64_t> median = medians[k].Median(totals_[k]);
      by_stage_[k].pooled_median = median ? *median : Gathered(k, /*mad=*/false);
    }
  }

  // The second walk: each stage's MAD from its bracket, hence its outlier limit, and in
  // `candidates` the deviations past the limit's floor, in walk order. False when they may miss
  // an outlier (a MAD bracket missed: the MAD may lie under its floor) or overflowed.
  bool MadsAndCandidates(std::vector<Candidate>* candidates) {
    std::vector<Bracket> mads;
    std::vector<double> limit_floor(static_cast<size_t>(stages_));
    size_t all = 0;
    for (int k = 0; k < stages_; ++k) {
      all += totals_[k];
      const int64_t median = by_stage_[k].pooled_median;
      for (int64_t& v : samples_[k]) v = v >= median ? v - median : median - v;
      mads.push_back(Bracket::AroundMiddle(samples_[k], totals_[k], selection_));
      // The limit (SetOutlierLimit) grows with the MAD: at the bracket's floor it is at its least.
      const double mad_floor = static_cast<double>(std::max<int64_t>(0, mads.back().floor()));
      limit_floor[k] = static_cast<double>(median) + kOutlierScales * (kMadToSigma * mad_floor);
    }
    const size_t room = all / 32 + selection_.min_candidate_room;
    ForEachRun(window_, usable_, stages_,
               [&](const StepDeviations& step, int k, int first, int end) {
                 const StepDeviations::Column column = step.column(k, by_stage_[k].sign);
                 const int64_t median = by_stage_[k].pooled_median;
                 const double floor = limit_floor[k];
                 Bracket::Adder add(mads[k]);
                 for (int m = first; m < end; ++m) {
                   if (!step.present(m)) continue;
                   const int64_t dev = column.at(m);
                   add(dev >= median ? dev - median : median - dev);
                   if (static_cast<double>(dev) > floor && candidates->size() <= room) {
                     candidates->push_back({m, k, dev});
                   }
                 }
               });
    bool hold = candidates->size() <= room;
    for (int k = 0; k < stages_; ++k) {
      if (totals_[k] == 0) continue;
      const std::optional<int64_t> mad = mads[k].Median(totals_[k]);
      if (!mad) hold = false;
      SetOutlierLimit(by_stage_[k].pooled_median, mad ? *mad : Gathered(k, /*mad=*/true),
                      &by_stage_[k]);
    }
    return hold;
  }

  // Each cell's outliers: from the candidates where they hold, else in a third walk.
  void CountOutliers(const std::vector<Candidate>& candidates, bool hold) {
    if (hold) {
      for (const Candidate& c : candidates) {
        CountOutlier(c.member, c.stage, c.dev, by_stage_[c.stage], &sums_);
      }
      return;
    }
    ForEachRun(window_, usable_, stages_,
               [&](const StepDeviations& step, int k, int first, int end) {
                 const StepDeviations::Column column = step.column(k, by_stage_[k].sign);
                 for (int m = first; m < end; ++m) {
                   if (step.present(m)) CountOutlier(m, k, column.at(m), by_stage_[k], &sums_);
                 }
               });
  }

  // The table from the sums and each stage's figures.
  void Fill(RankEvidenceTable* table) {
    std::vector<double> means;
    for (int k = 0; k < stages_; ++k) {
      if (CenterAndSpread(k, sums_, &by_stage_[k], &means)) {
        FillStage(k, by_stage_[k], sums_, table);
      }
    }
  }

 private:
  int64_t Gathered(int k, bool mad) const {
    return GatheredMedian(window_, usable_, k, by_stage_[k], totals_[k], mad);
  }

  const AccountingWindow& window_;
  const EvidenceSelection& selection_;
  const int stages_;
  const std::vector<UsableStep> usable_;
  const std::vector<size_t> totals_;
  std::vector<StageFigures> by_stage_;
  std::vector<std::vector<int64_t>> samples_;
  SumsTable sums_;
};

}  // namespace

// Two walks of the window (issue 33: at 100,000 ranks it holds 60 M deviations): the first sums
// every cell and brackets each stage's pooled median, the second its MAD, keeping the deviations
// that may be outliers; the brackets come from a sample drawn before. A bracket that misses
// takes its stage the plain way, a candidate list that overflows a third walk.
RankEvidenceTable ComputeRankEvidence(const AccountingWindow& window, const StageSchema& schema,
                                      const EvidenceSelection& selection) {
  RankEvidenceTable table(window.stages(), window.members());
  if (window.members() < 2) return table;
  EvidenceWalks walks(window, schema, selection);
  walks.SumAndMedians();
  std::vector<Candidate> candidates;
  const bool hold = walks.MadsAndCandidates(&candidates);
  walks.CountOutliers(candidates, hold);
  walks.Fill(&table);
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
