#include "daemon/accounting/rank_evidence.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "catch2/catch.hpp"
#include "daemon/accounting/frontier.h"
#include "daemon/accounting/robust_stats.h"

namespace stagefrontier {
namespace {

constexpr int kStages = 3;  // data:io, compute:compute, sync:sync

StageSchema Schema() { return *StageSchema::Parse("data:io,compute:compute,sync:sync"); }

// A duration that marks its member absent from the step (never one a noise draw gives).
constexpr int64_t kAbsent = std::numeric_limits<int64_t>::min();

// durations(step, member, stage) in ns, called once for each, in that order; a member whose
// first stage's duration is kAbsent is absent from the step. accounted(step): how many stages
// the step accounted (all unless told).
template <typename F>
AccountingWindow Window(int members, int steps, F durations,
                        const std::function<int(int)>& accounted = nullptr) {
  AccountingWindow window(static_cast<size_t>(steps), members, kStages);
  StepMatrix matrix(members, kStages);
  const std::vector<int64_t> probe(static_cast<size_t>(members) * kStages, -1);
  for (int i = 0; i < steps; ++i) {
    matrix.Reset();
    StepAccounting acc;
    acc.step = i;
    acc.stages.assign(kStages, StageAccounting{});
    std::vector<std::vector<int64_t>> by_stage(kStages);
    for (int m = 0; m < members; ++m) {
      int64_t d[kStages];
      for (int k = 0; k < kStages; ++k) d[k] = durations(i, m, k);
      if (d[0] == kAbsent) continue;
      std::vector<int64_t> b = {0};
      for (int k = 0; k < kStages; ++k) {
        by_stage[k].push_back(d[k]);
        b.push_back(b.back() + d[k]);
      }
      matrix.SetMember(m, b);
    }
    for (int k = 0; k < kStages; ++k) {
      acc.stages[k].median_duration_ns = MedianInPlace(by_stage[k]);  // as the frontier's
    }
    if (accounted) acc.stages.resize(static_cast<size_t>(accounted(i)));
    window.Push(acc, matrix, probe);
  }
  return window;
}

TEST_CASE("a persistent slow member stands out; its peers do not", "[rank_evidence]") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0, 300'000);
  const AccountingWindow w = Window(8, 100, [&](int, int m, int k) {
    const double base = k == 1 ? 10e6 : 1e6;
    return static_cast<int64_t>(base + noise(rng) + (k == 1 && m == 5 ? 400'000 : 0));
  });
  const RankEvidenceTable t = ComputeRankEvidence(w, Schema());
  CHECK(t.at(1, 5).shift_ns == Approx(400'000).margin(120'000));
  CHECK(t.at(1, 5).z > 8);
  for (int m = 0; m < 8; ++m) {
    if (m != 5) CHECK(t.at(1, m).z < 3);
    CHECK(t.at(0, m).z < 3.5);  // no fault in data
  }
}

// A two-rank group (a pipeline stage's two replicas, a tensor position's): the median of two
// is their mean, so each deviated by half the gap and the verdict said "0.47 ms per step
// slower than its peers" for a rank about 1 ms slower. The gap counts whole; z as before.
TEST_CASE("in a two-member group the shift is the whole gap to the peer", "[rank_evidence]") {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0, 300'000);
  const AccountingWindow w = Window(2, 100, [&](int, int m, int k) {
    const double base = k == 1 ? 10e6 : 1e6;
    return static_cast<int64_t>(base + noise(rng) + (k == 1 && m == 1 ? 1'000'000 : 0));
  });
  const RankEvidenceTable t = ComputeRankEvidence(w, Schema());
  CHECK(t.at(1, 1).shift_ns == Approx(1'000'000).margin(150'000));
  CHECK(t.at(1, 0).shift_ns == Approx(-1'000'000).margin(150'000));
  // z: the gap over the spread of the difference of two noises (sqrt(2) x 300 us), x sqrt(100).
  CHECK(t.at(1, 1).z == Approx(1e6 / (std::sqrt(2.0) * 300'000) * 10).epsilon(0.25));
}

TEST_CASE("a group-wide slowdown cancels: no member stands out", "[rank_evidence]") {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0, 200'000);
  const AccountingWindow w = Window(6, 100, [&](int i, int, int k) {
    return static_cast<int64_t>((k == 1 ? 10e6 : 1e6) + noise(rng) + (i >= 50 ? 3e6 : 0));
  });
  const RankEvidenceTable t = ComputeRankEvidence(w, Schema());
  for (int m = 0; m < 6; ++m) CHECK(std::abs(t.at(1, m).z) < 3.5);
}

TEST_CASE("at a wait stage a shorter wait reads as a late arrival", "[rank_evidence]") {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0, 100'000);
  const AccountingWindow w = Window(4, 80, [&](int, int m, int k) {
    if (k == 2) return static_cast<int64_t>(5e6 + noise(rng) - (m == 2 ? 2e6 : 0));
    return static_cast<int64_t>(1e6 + noise(rng));
  });
  const RankEvidenceTable t = ComputeRankEvidence(w, Schema());
  CHECK(t.at(2, 2).shift_ns > 1.5e6);
  CHECK(t.at(2, 2).z > 8);
}

TEST_CASE("a recurring fault shows as outlier steps", "[rank_evidence]") {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0, 300'000);
  // 1 step in 8 on member 3: 12 ms more; a mean over 100 steps moves by 1.5 ms.
  const AccountingWindow w = Window(8, 100, [&](int i, int m, int k) {
    return static_cast<int64_t>((k == 1 ? 10e6 : 1e6) + noise(rng) +
                                (k == 1 && m == 3 && i % 8 == 0 ? 12e6 : 0));
  });
  const RankEvidenceTable t = ComputeRankEvidence(w, Schema());
  CHECK(t.at(1, 3).outlier_steps == 13);
  CHECK(t.at(1, 3).outlier_z > 5);
  // What one recurrence costs, where the mean spreads it over every step.
  CHECK(t.at(1, 3).outlier_excess_ns == Approx(12e6).margin(0.5e6));
  CHECK(t.at(1, 3).shift_ns == Approx(1.56e6).margin(0.3e6));
  for (int m = 0; m < 8; ++m) {
    if (m != 3) CHECK(t.at(1, m).outlier_steps < kMinOutlierSteps);
  }
}

// The table as the math reads (rank_evidence.h), walked the plain way: one stage at a time,
// the pooled deviations listed with their member in step then member order.
RankEvidenceTable ReferenceEvidence(const AccountingWindow& w, const StageSchema& schema) {
  const int n = w.members();
  RankEvidenceTable t(w.stages(), n);
  for (int k = 0; k < w.stages(); ++k) {
    const int64_t sign = schema.IsWait(static_cast<size_t>(k)) ? -1 : 1;
    std::vector<double> sum(n), sum_sq(n), excess(n);
    std::vector<int32_t> count(n), outliers(n);
    std::vector<int64_t> devs;
    std::vector<int> who;
    for (size_t i = 0; i < w.size(); ++i) {
      int present = 0;
      for (int m = 0; m < n; ++m) present += w.present(i, m) ? 1 : 0;
      if (present < 2 || static_cast<int>(w.at(i).accounting.stages.size()) <= k) continue;
      for (int m = 0; m < n; ++m) {
        if (!w.present(i, m)) continue;
        const int64_t dev = (present == 2 ? 2 : 1) * sign *
                            (w.duration(i, m, k) - w.at(i).accounting.stages[k].median_duration_ns);
        devs.push_back(dev);
        who.push_back(m);
        sum[m] += static_cast<double>(dev);
        sum_sq[m] += static_cast<double>(dev) * static_cast<double>(dev);
        ++count[m];
      }
    }
    std::vector<double> means;
    double within = 0;
    int64_t dof = 0, all_steps = 0, all_outliers = 0;
    for (int m = 0; m < n; ++m) {
      if (count[m] == 0) continue;
      means.push_back(sum[m] / count[m]);
      within += std::max(0.0, sum_sq[m] - count[m] * means.back() * means.back());
      dof += count[m] - 1;
    }
    if (means.size() < 2) continue;
    std::sort(means.begin(), means.end());
    const size_t h = means.size() / 2;
    const double center = means.size() % 2 == 1 ? means[h] : (means[h - 1] + means[h]) / 2;
    std::vector<int64_t> pooled = devs;
    const int64_t median = MedianInPlace(pooled);
    const double scale = kMadToSigma * static_cast<double>(MadInPlace(pooled, median));
    for (size_t e = 0; e < devs.size() && scale > 0; ++e) {
      if (static_cast<double>(devs[e]) > static_cast<double>(median) + kOutlierScales * scale) {
        ++outliers[who[e]];
        excess[who[e]] += static_cast<double>(devs[e] - median);
      }
    }
    for (int m = 0; m < n; ++m) {
      all_steps += count[m];
      all_outliers += outliers[m];
    }
    const double sd = dof > 0 ? std::sqrt(within / static_cast<double>(dof)) : 0.0;
    for (int m = 0; m < n; ++m) {
      RankEvidence& e = t.at(k, m);
      e.steps = count[m];
      if (count[m] == 0) continue;
      e.shift_ns = sum[m] / count[m] - center;
      e.outlier_steps = outliers[m];
      if (outliers[m] > 0) e.outlier_excess_ns = excess[m] / outliers[m];
      const int64_t others = all_steps - count[m];
      if (others > 0 && outliers[m] >= kMinOutlierSteps) {
        const double p =
            std::max<double>(1.0, static_cast<double>(all_outliers - outliers[m])) / others;
        const double expect = p * count[m];
        e.outlier_z = (outliers[m] - expect) / std::sqrt(std::max(1e-9, expect * (1 - p)));
      }
      e.z = sd > 0 && count[m] >= 2 ? e.shift_ns * std::sqrt(static_cast<double>(count[m])) / sd
                                    : 0.0;
    }
  }
  return t;
}

// A window of 100 steps with what the plain walk must agree on: steps with one or two members
// present, a member often absent, steps that accounted only the first two stages, a stage of
// constant durations (no spread: no outlier test), a recurring fault (member 1, compute) and a
// late arrival (member 0, sync). `unit` scales every duration: at seconds the squares pass 2^53,
// so a sum taken in another order would round differently.
AccountingWindow MixedWindow(int members, double unit, std::mt19937_64& rng) {
  std::normal_distribution<double> noise(0, 0.3 * unit);
  std::uniform_int_distribution<int> roll(0, 99);
  std::vector<int> shape(100);
  for (int& s : shape) s = roll(rng);
  const auto durations = [&](int i, int m, int k) -> int64_t {
    if ((shape[i] < 5 && m > 0) || (shape[i] < 10 && m > 1) ||
        (shape[i] < 30 && m == members - 1)) {
      return kAbsent;
    }
    const double base = k == 0 ? unit : k == 1 ? 10 * unit + noise(rng) : 3 * unit + noise(rng);
    const double fault = (k == 1 && m == 1 && i % 6 == 0) ? 9 * unit : 0;
    const double late = (k == 2 && m == 0) ? -unit : 0;
    return static_cast<int64_t>(std::max(0.0, base + fault + late));
  };
  // Some steps accounted two stages only.
  return Window(members, 100, durations,
                [&](int i) { return shape[i] >= 30 && shape[i] < 36 ? 2 : kStages; });
}

// The table is taken in two walks of the window, each stage's median and MAD from a bracket
// a sample drew (EvidenceSelection), not the plain way (every stage's deviations listed): not a
// bit of it may move, whether the brackets hold, miss (a sample of 64 with no margin; the
// constant stage's), fill up, or the outlier candidates overflow.
TEST_CASE("the evidence equals the plain walk's, bit for bit", "[rank_evidence]") {
  std::mt19937_64 rng(17);
  const auto bits = [](double x) { return std::bit_cast<uint64_t>(x); };
  const std::vector<std::pair<const char*, EvidenceSelection>> selections = {
      {"default", {}},
      {"every stage bracketed", {.min_values = 0}},
      {"brackets that miss", {.sample = 64, .margin = 0, .min_values = 0}},
      {"no room for candidates", {.min_values = 0, .min_candidate_room = 0}},
  };
  for (double unit : {1e6, 1e9}) {
    for (int members : {2, 3, 9, 40, 2000}) {
      const AccountingWindow w = MixedWindow(members, unit, rng);
      const RankEvidenceTable want = ReferenceEvidence(w, Schema());
      for (const auto& [name, selection] : selections) {
        const RankEvidenceTable got = ComputeRankEvidence(w, Schema(), selection);
        for (int k = 0; k < kStages; ++k) {
          for (int m = 0; m < members; ++m) {
            INFO(name << ": unit " << unit << " members " << members << " stage " << k << " member "
                      << m);
            const RankEvidence& g = got.at(k, m);
            const RankEvidence& e = want.at(k, m);
            CHECK(g.steps == e.steps);
            CHECK(bits(g.shift_ns) == bits(e.shift_ns));
            CHECK(bits(g.z) == bits(e.z));
            CHECK(g.outlier_steps == e.outlier_steps);
            CHECK(bits(g.outlier_z) == bits(e.outlier_z));
            CHECK(bits(g.outlier_excess_ns) == bits(e.outlier_excess_ns));
          }
        }
        // Not two empty tables: the fault and the late arrival are seen.
        INFO(name << ": unit " << unit << " members " << members);
        if (members > 2) CHECK(got.at(1, 1).outlier_steps >= kMinOutlierSteps);
        CHECK(got.at(2, 0).shift_ns > 0);
      }
    }
  }
}

TEST_CASE("fewer than two members or steps give zeros, never NaN", "[rank_evidence]") {
  const AccountingWindow one = Window(1, 10, [](int, int, int) { return int64_t{1000}; });
  CHECK(ComputeRankEvidence(one, Schema()).at(1, 0).z == 0);
  const AccountingWindow flat = Window(4, 10, [](int, int, int) { return int64_t{1000}; });
  const RankEvidenceTable t = ComputeRankEvidence(flat, Schema());
  for (int m = 0; m < 4; ++m) {
    CHECK(t.at(1, m).z == 0);
    CHECK(t.at(1, m).outlier_z == 0);
  }
  const AccountingWindow empty(10, 4, kStages);
  CHECK(ComputeRankEvidence(empty, Schema()).at(0, 0).steps == 0);
}

}  // namespace
}  // namespace stagefrontier
