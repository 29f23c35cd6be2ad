// Verdict steps 1-2: the excess table and the noise gate.
#include "daemon/accounting/excess_table.h"

#include <catch2/catch.hpp>

#include "daemon/accounting/healthy_gate.h"
#include "tests/daemon/accounting/window_fixture.h"

namespace stagefrontier::testing {
namespace {

int64_t Flat(int, int) { return 1'000'000; }

TEST_CASE("excess table: shared charges split evenly, steps counted once per cell",
          "[verdict_steps]") {
  // Ranks 10, 20, 30: member m is rank 10 * (m + 1).
  const GroupMembers members({10, 20, 30}, {});
  WindowBuilder b(3, "data:io,compute:compute,sync:mixed");
  b.Step(Flat, {Charge(0, {20}, 600), Charge(0, {20, 30}, 400)});
  b.Step(Flat);
  b.Step(Flat, {Charge(2, {10}, 300, AttributionKind::kMixedUnresolved)});
  const ExcessTable t = BuildExcessTable(b.window(), members);
  CHECK(t.cell[t.Index(0, 1)] == 800);
  CHECK(t.cell[t.Index(0, 2)] == 200);
  CHECK(t.cell_steps[t.Index(0, 1)] == 1);  // two charges, one step
  CHECK(t.stage_total == std::vector<double>{1000, 0, 300});
  CHECK(t.stage_unresolved == std::vector<double>{0, 0, 300});
  CHECK(t.total == 1300);
  CHECK(t.flagged_steps == 2);
  CHECK(t.exposed_ns == 3 * 3'000'000);
  CHECK(t.order == std::vector<size_t>{t.Index(0, 1), t.Index(2, 0), t.Index(0, 2)});
  CHECK(t.Share(t.Index(0, 1)) == Approx(800.0 / 1300));

  const std::vector<ExcessCell> cells = ExcessCells(t, members);
  REQUIRE(cells.size() == 3);
  CHECK(cells[0].stage == 0);
  CHECK(cells[0].rank == 20);
  CHECK(cells[0].excess_ns == 800);
  CHECK(cells[1].rank == 10);
}

TEST_CASE("excess table: equal cells keep stage-major order", "[verdict_steps]") {
  const GroupMembers members({0, 1}, {});
  WindowBuilder b(2, "data:io,compute:compute");
  b.Step(Flat, {Charge(1, {0}, 500), Charge(0, {1}, 500)});
  const ExcessTable t = BuildExcessTable(b.window(), members);
  CHECK(t.order == std::vector<size_t>{t.Index(0, 1), t.Index(1, 0)});
}

TEST_CASE("noise gate: too few flagged steps or too little excess is HEALTHY", "[verdict_steps]") {
  EngineConfig config;
  config.min_flagged_steps = 3;
  config.healthy_fraction = 0.01;
  ExcessTable t;
  t.exposed_ns = 1'000'000;
  t.flagged_steps = 2;
  t.total = 500'000;
  CHECK(WithinNoise(t, config));  // two flagged steps
  t.flagged_steps = 3;
  CHECK_FALSE(WithinNoise(t, config));
  t.total = 9'999;  // under 1% of the exposed time
  CHECK(WithinNoise(t, config));
}

}  // namespace
}  // namespace stagefrontier::testing
