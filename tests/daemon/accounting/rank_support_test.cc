// Verdict step 4: the evidence predicates on a rank evidence table (RankSupport).
#include <catch2/catch.hpp>

#include "daemon/accounting/rank_evidence.h"

namespace stagefrontier {
namespace {

StageSchema Schema() { return *StageSchema::Parse("data:io,compute:compute,sync:mixed"); }

constexpr SupportThresholds kThresholds{/*z_support=*/3, /*z_strong=*/5, /*material_ns=*/1000};

// Recurrences that stand out (outlier z 7, material each) with a mean shift at 3.5 standard
// errors, under the material floor.
RankEvidence Recurring() {
  return RankEvidence{.shift_ns = 300,
                      .z = 3.5,
                      .steps = 100,
                      .outlier_steps = 14,
                      .outlier_z = 7,
                      .outlier_excess_ns = 5000};
}

TEST_CASE("rank support: strong needs z_strong and a material shift", "[verdict_steps]") {
  RankEvidenceTable t(3, 2);
  const StageSchema schema = Schema();
  const RankSupport s(t, schema, kThresholds);
  t.at(0, 0) = RankEvidence{.shift_ns = 2000, .z = 6, .steps = 100};
  t.at(0, 1) = RankEvidence{.shift_ns = 2000, .z = 4, .steps = 100};
  t.at(1, 0) = RankEvidence{.shift_ns = 900, .z = 9, .steps = 100};  // not material
  CHECK(s.Strong(0, 0));
  CHECK_FALSE(s.Strong(0, 1));
  CHECK(s.Supported(0, 1));
  CHECK_FALSE(s.Supported(1, 0));
  CHECK(s.Supported(2, 1));  // a mixed stage: the probe or MIXED_SYNC decides
  CHECK(s.SupportedAnywhere(1));
}

TEST_CASE("rank support: isolated spikes are taken out of the shift", "[verdict_steps]") {
  RankEvidenceTable t(3, 1);
  const StageSchema schema = Schema();
  const RankSupport s(t, schema, kThresholds);
  // Three spikes of 40,000 ns over 100 steps: 1,200 ns of the 1,500 ns shift.
  t.at(0, 0) = RankEvidence{
      .shift_ns = 1500, .z = 8, .steps = 100, .outlier_steps = 3, .outlier_excess_ns = 40'000};
  CHECK_FALSE(s.Supported(0, 0));
  t.at(0, 0).outlier_steps = 5;  // a recurring fault: its outliers count
  CHECK(s.Supported(0, 0));
}

TEST_CASE("rank support: a recurring fault is strong on its outliers", "[verdict_steps]") {
  RankEvidenceTable t(3, 1);
  const StageSchema schema = Schema();
  const RankSupport s(t, schema, kThresholds);
  // Mean shift under the material floor, but its recurrences are material and stand out.
  t.at(0, 0) = Recurring();
  CHECK(s.Strong(0, 0));
  t.at(0, 0).z = 2;  // the mean test under the support level
  CHECK_FALSE(s.Strong(0, 0));
  // A named cell keeps its name on strong, material recurrences whatever the mean-shift z.
  CHECK(s.StillSupported(0, 0));
  t.at(0, 0).outlier_z = 4;
  CHECK_FALSE(s.StillSupported(0, 0));
}

TEST_CASE("rank support: a recurring fault short of z_strong needs the window before",
          "[verdict_steps]") {
  RankEvidenceTable t(3, 2);
  const StageSchema schema = Schema();
  // Recurrences that stand out (outlier z 7) with a mean shift at 3.5 standard errors: what a
  // healthy rank descheduled more than its peer shows in one window.
  t.at(1, 1) = Recurring();
  const std::vector<CellRef> none;
  const std::vector<CellRef> held = {{1, 1}};
  const std::vector<CellRef> other = {{1, 0}, {0, 1}};
  // No window before (a group's first): the test alone decides.
  CHECK(RankSupport(t, schema, kThresholds, nullptr).Strong(1, 1));
  // The window before held nothing, or other cells: not evident.
  CHECK_FALSE(RankSupport(t, schema, kThresholds, &none).Strong(1, 1));
  CHECK_FALSE(RankSupport(t, schema, kThresholds, &other).Strong(1, 1));
  CHECK_FALSE(RankSupport(t, schema, kThresholds, &other).Supported(1, 1));
  // It held this cell: the same fault, a window later.
  CHECK(RankSupport(t, schema, kThresholds, &held).Strong(1, 1));
  // A mean shift at z_strong needs no window before.
  t.at(1, 1).z = 5.5;
  CHECK(RankSupport(t, schema, kThresholds, &none).Strong(1, 1));
  // What a window holds for the next one does not depend on the window before it.
  t.at(1, 1).z = 3.5;
  CHECK(RankSupport(t, schema, kThresholds, &none).Held(1, 1));
  // Material recurrences at support level hold even with the mean test under it (a fault that
  // began late in the window); recurrences under it, or immaterial ones, do not.
  t.at(1, 1).z = 1;
  t.at(1, 1).outlier_z = 3.2;
  CHECK(RankSupport(t, schema, kThresholds, &none).Held(1, 1));
  t.at(1, 1).outlier_z = 2.5;
  CHECK_FALSE(RankSupport(t, schema, kThresholds, &none).Held(1, 1));
  t.at(1, 1).outlier_z = 7;
  t.at(1, 1).outlier_excess_ns = 900;
  CHECK_FALSE(RankSupport(t, schema, kThresholds, &none).Held(1, 1));
}

TEST_CASE("rank support: a recurrence is material at twice the floor", "[verdict_steps]") {
  // A healthy rank on busy cores loses a scheduler slice in a third of its steps: 1.6 times
  // the floor each, strongly recurring (session 31's healthy pipelines). Not a fault.
  RankEvidenceTable t(3, 2);
  const StageSchema schema = Schema();
  t.at(1, 0) = Recurring();
  t.at(1, 0).z = 5.5;
  t.at(1, 0).outlier_excess_ns = 1600;
  const RankSupport s(t, schema, kThresholds);
  CHECK_FALSE(s.Strong(1, 0));
  CHECK_FALSE(s.Held(1, 0));
  CHECK_FALSE(s.StillSupported(1, 0));
  t.at(1, 0).outlier_excess_ns = 2 * kThresholds.material_ns;
  CHECK(s.Strong(1, 0));
  CHECK(s.Held(1, 0));
}

}  // namespace
}  // namespace stagefrontier
