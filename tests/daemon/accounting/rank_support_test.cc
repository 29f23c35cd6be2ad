// Verdict step 4: the evidence predicates on a rank evidence table (RankSupport).
#include <catch2/catch.hpp>

#include "daemon/accounting/rank_evidence.h"

namespace stagefrontier {
namespace {

StageSchema Schema() { return *StageSchema::Parse("data:io,compute:compute,sync:mixed"); }

constexpr SupportThresholds kThresholds{/*z_support=*/3, /*z_strong=*/5, /*material_ns=*/1000};

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
  t.at(0, 0) = RankEvidence{.shift_ns = 300,
                            .z = 3.5,
                            .steps = 100,
                            .outlier_steps = 14,
                            .outlier_z = 7,
                            .outlier_excess_ns = 5000};
  CHECK(s.Strong(0, 0));
  t.at(0, 0).z = 2;  // the mean test under the support level
  CHECK_FALSE(s.Strong(0, 0));
  // A named cell keeps its name on strong, material recurrences whatever the mean-shift z.
  CHECK(s.StillSupported(0, 0));
  t.at(0, 0).outlier_z = 4;
  CHECK_FALSE(s.StillSupported(0, 0));
}

}  // namespace
}  // namespace stagefrontier
