// Verdict step 6: the evidence about the top cell (margins, next-wait agreement) and its
// rivals.
#include "daemon/accounting/top_cell_evidence.h"

#include <catch2/catch.hpp>

#include "tests/daemon/accounting/window_fixture.h"

namespace stagefrontier::testing {
namespace {

constexpr int64_t kMs = 1'000'000;

// Member `late` spends 5 ms in data (others 1 ms) and so waits least at sync; member
// `also_late`, if any, waits almost as little.
std::function<int64_t(int, int)> Step(int late, int also_late = -1) {
  return [=](int m, int k) -> int64_t {
    if (k == 0) return m == late ? 5 * kMs : 1 * kMs;
    if (k == 1) return 1 * kMs;
    if (m == late) return 1 * kMs;
    return m == also_late ? 1 * kMs + 100'000 : 5 * kMs;
  };
}

TEST_CASE("top-cell evidence: margins, agreement at the next wait, who else was late",
          "[verdict_steps]") {
  WindowBuilder b(3, "data:io,compute:compute,sync:sync");
  b.Step(Step(2), {Charge(0, {2}, 4 * kMs, AttributionKind::kFrontierLeader, 4 * kMs)});
  b.Step(Step(2, 0), {Charge(0, {2}, 4 * kMs, AttributionKind::kFrontierLeader, 2 * kMs)});
  b.Step(Step(2), {Charge(0, {2, 1}, 4 * kMs, AttributionKind::kFrontierLeader, 1 * kMs)});
  b.Step(Step(1));  // not charged to the top cell
  const GroupMembers members({0, 1, 2}, {});
  const EngineConfig config;
  const LastArrivers arrivers(b.window(), b.schema(), members, config);
  const TopCellEvidence e =
      GatherTopCellEvidence(b.window(), b.schema(), members, config, arrivers, {0, 2});
  CHECK(e.median_margin_ns == 2 * kMs);
  CHECK(e.tie_tolerance_ns == static_cast<int64_t>(config.tie_z * 100'000));
  CHECK(e.wait_agreement == Approx(2.0 / 3));
  CHECK(e.also_late == std::map<int32_t, int32_t>{{0, 1}});
  CHECK(e.tied_with == std::map<int32_t, int32_t>{{1, 1}});
  CHECK(e.steps_to_profile == std::vector<int64_t>{0, 1, 2});
}

TEST_CASE("top-cell evidence: a wait every member passed through empty is not the next wait",
          "[verdict_steps]") {
  // Regression (real 2 x 2 pipeline run): on the last pipeline stage the send after fwd is
  // empty on both replicas, so both looked "last" there and the slow rank read CONCURRENT with
  // its peer; the data-parallel sync after it is where the peer waits.
  WindowBuilder b(2, "data:io,send:sync,sync:sync");
  auto step = [](int m, int k) -> int64_t {
    if (k == 0) return m == 1 ? 5 * kMs : 1 * kMs;
    if (k == 1) return 4'000;  // empty: nothing to send on this pipeline stage
    return m == 1 ? 1 * kMs : 5 * kMs;
  };
  for (int i = 0; i < 3; ++i) {
    b.Step(step, {Charge(0, {1}, 4 * kMs, AttributionKind::kFrontierLeader, 4 * kMs)});
  }
  const GroupMembers members({0, 1}, {});
  const EngineConfig config;
  const LastArrivers arrivers(b.window(), b.schema(), members, config);
  const TopCellEvidence e =
      GatherTopCellEvidence(b.window(), b.schema(), members, config, arrivers, {0, 1});
  CHECK(e.wait_agreement == 1.0);
  CHECK(e.also_late.empty());
}

TEST_CASE("top-cell evidence: a late start counts as agreement", "[verdict_steps]") {
  WindowBuilder b(3, "data:io,compute:compute,sync:sync");
  b.Step(Step(2), {Charge(2, {2}, 4 * kMs, AttributionKind::kLateStart, 3 * kMs)});
  const GroupMembers members({0, 1, 2}, {});
  const EngineConfig config;
  const LastArrivers arrivers(b.window(), b.schema(), members, config);
  const TopCellEvidence e =
      GatherTopCellEvidence(b.window(), b.schema(), members, config, arrivers, {2, 2});
  CHECK(e.wait_agreement == 1.0);
  CHECK(e.median_margin_ns == 3 * kMs);
}

TEST_CASE("rivals: co-leaders near the top's excess, large supported cells elsewhere",
          "[verdict_steps]") {
  const StageSchema schema = *StageSchema::Parse("data:io,compute:compute,sync:sync");
  const GroupMembers members({0, 1, 2}, {});
  EngineConfig config;
  ExcessTable t;
  t.stages = 3;
  t.members = 3;
  t.cell.assign(9, 0);
  t.cell[t.Index(0, 2)] = 5000;
  t.cell[t.Index(0, 1)] = 4900;  // a co-leader, if supported
  t.cell[t.Index(1, 0)] = 4000;  // large and supported: a rival
  t.cell[t.Index(2, 2)] = 3000;  // the top rank's own late arrival
  t.total = 16900;
  t.order = {t.Index(0, 2), t.Index(0, 1), t.Index(1, 0), t.Index(2, 2)};
  RankEvidenceTable e(3, 3);
  e.at(1, 0) = RankEvidence{.shift_ns = 4000, .z = 4, .steps = 100};
  e.at(2, 2) = RankEvidence{.shift_ns = 4000, .z = 4, .steps = 100};
  const RankSupport support(e, schema, {3, 5, 1000});
  Rivals r = FindRivals(t, support, schema, config, members, {0, 2});
  CHECK(r.co_leaders == std::vector<int32_t>{2});  // member 1 unsupported
  CHECK(r.large == std::vector<size_t>{t.Index(1, 0)});
  e.at(0, 1) = RankEvidence{.shift_ns = 4000, .z = 4, .steps = 100};
  r = FindRivals(t, support, schema, config, members, {0, 2});
  CHECK(r.co_leaders == std::vector<int32_t>{1, 2});
}

}  // namespace
}  // namespace stagefrontier::testing
