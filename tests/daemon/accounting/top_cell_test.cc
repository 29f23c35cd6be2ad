// Verdict step 5: the top-cell choice (strong evidence, carry-over, own stage) and the
// suspect reordering it implies.
#include "daemon/accounting/top_cell.h"

#include <catch2/catch.hpp>

#include "daemon/accounting/suspects.h"

namespace stagefrontier {
namespace {

// data:io, compute:compute, sync:sync, optimizer:compute (a tail stage).
StageSchema Schema() {
  return *StageSchema::Parse("data:io,compute:compute,sync:sync,optimizer:compute");
}

constexpr SupportThresholds kThresholds{3, 5, 1000};
constexpr int kMembers = 3;

// A table whose only excess is `excess` in (stage, member).
ExcessTable OneCell(int stage, int member, double excess = 5000) {
  ExcessTable t;
  t.stages = 4;
  t.members = kMembers;
  t.cell.assign(12, 0);
  t.cell_steps.assign(12, 0);
  t.cell[t.Index(stage, member)] = excess;
  t.cell_steps[t.Index(stage, member)] = 7;
  t.total = excess;
  t.order = {t.Index(stage, member)};
  return t;
}

RankEvidence Shift(double shift_ns, double z) {
  return RankEvidence{.shift_ns = shift_ns, .z = z, .steps = 100};
}

TEST_CASE("top cell: a supported charged cell stays on top", "[verdict_steps]") {
  const StageSchema schema = Schema();
  RankEvidenceTable e(4, kMembers);
  e.at(0, 1) = Shift(2000, 4);
  const RankSupport s(e, schema, kThresholds);
  const TopCellChoice top =
      ChooseTopCell(OneCell(0, 1), s, schema, StrongestCell(s, schema, kMembers), {});
  CHECK(top.basis == TopCellBasis::kCharged);
  CHECK(top.cell.stage == 0);
  CHECK(top.cell.member == 1);
}

TEST_CASE("top cell: unsupported, no strong evidence: the group's", "[verdict_steps]") {
  const StageSchema schema = Schema();
  RankEvidenceTable e(4, kMembers);
  const RankSupport s(e, schema, kThresholds);
  const CellRef strong = StrongestCell(s, schema, kMembers);
  CHECK_FALSE(strong.valid());
  const TopCellChoice top = ChooseTopCell(OneCell(0, 1), s, schema, strong, {});
  CHECK(top.basis == TopCellBasis::kGroup);
  CHECK(top.cell.member == 1);  // kept for the evidence words
}

TEST_CASE("top cell: unsupported, the strongest work cell is named instead", "[verdict_steps]") {
  const StageSchema schema = Schema();
  RankEvidenceTable e(4, kMembers);
  e.at(1, 2) = Shift(3000, 6);
  e.at(3, 0) = Shift(4000, 7);
  e.at(2, 1) = Shift(9000, 20);  // a wait stage is never the strongest cell
  const RankSupport s(e, schema, kThresholds);
  const CellRef strong = StrongestCell(s, schema, kMembers);
  CHECK(strong.stage == 3);
  CHECK(strong.member == 0);
  const TopCellChoice top = ChooseTopCell(OneCell(0, 1), s, schema, strong, {});
  CHECK(top.basis == TopCellBasis::kEvidence);
  CHECK(top.cell.stage == 3);
  CHECK_FALSE(top.carried);
}

TEST_CASE("top cell: a pipeline transfer's duration never names its rank", "[verdict_steps]") {
  // Regression (CI, e2e_torch_pipeline_test): a healthy unbalanced pipeline read CLEAR on a
  // first-stage rank's recv_grad, 6 ms longer than its peer's: the time its downstream
  // neighbour took, strong as evidence, not the rank's own work.
  const StageSchema schema = *StageSchema::Parse("data:io,recv_grad:p2p,sync:sync,apply:compute");
  RankEvidenceTable e(4, kMembers);
  e.at(1, 1) = Shift(6000, 30);
  const RankSupport s(e, schema, kThresholds);
  CHECK_FALSE(s.Supported(1, 1));  // nor does it back a charged cell
  CHECK_FALSE(StrongestCell(s, schema, kMembers).valid());
  const TopCellChoice top =
      ChooseTopCell(OneCell(0, 1), s, schema, StrongestCell(s, schema, kMembers), {});
  CHECK(top.basis == TopCellBasis::kGroup);
  // Nor does a late arrival at a wait move to it, nor a prior CLEAR on it carry.
  e.at(2, 1) = Shift(4000, 8);
  const RankSupport late_support(e, schema, kThresholds);
  const TopCellChoice late = ChooseTopCell(OneCell(2, 1), late_support, schema, {}, {});
  CHECK(late.basis == TopCellBasis::kCharged);
  CHECK(late.cell.stage == 2);
  const PriorClear named[1] = {{99, 1, 1}};
  CHECK_FALSE(CarryPriorClear(named, 100, s, schema, kMembers).cell.valid());
}

TEST_CASE("top cell: a late arrival at a wait moves to the rank's own stage", "[verdict_steps]") {
  const StageSchema schema = Schema();
  RankEvidenceTable e(4, kMembers);
  e.at(2, 1) = Shift(4000, 8);  // it waited least: arrived late
  e.at(0, 1) = Shift(1500, 4);
  e.at(3, 1) = Shift(3500, 4);  // the larger supported work stage
  const RankSupport s(e, schema, kThresholds);
  const TopCellChoice top =
      ChooseTopCell(OneCell(2, 1), s, schema, StrongestCell(s, schema, kMembers), {});
  CHECK(top.basis == TopCellBasis::kCharged);
  CHECK(top.cell.stage == 3);
}

TEST_CASE("top cell: a charged work stage gives way to a stronger one", "[verdict_steps]") {
  const StageSchema schema = Schema();
  RankEvidenceTable e(4, kMembers);
  e.at(1, 0) = Shift(1500, 4);
  e.at(3, 0) = Shift(6000, 9);
  const RankSupport s(e, schema, kThresholds);
  const TopCellChoice top =
      ChooseTopCell(OneCell(1, 0), s, schema, StrongestCell(s, schema, kMembers), {});
  CHECK(top.cell.stage == 3);
  CHECK(top.cell.member == 0);
}

TEST_CASE("carry-over: the latest prior CLEAR before the window, if still supported",
          "[verdict_steps]") {
  const StageSchema schema = Schema();
  RankEvidenceTable e(4, kMembers);
  e.at(3, 2) = Shift(1500, 3.5);  // supporting, not strong
  e.at(1, 1) = Shift(1500, 3.5);
  const RankSupport s(e, schema, kThresholds);
  const PriorClear named[2] = {{99, 1, 1}, {199, 3, 2}};
  const CarriedCell c = CarryPriorClear(named, /*first_step=*/200, s, schema, kMembers);
  CHECK(c.cell.stage == 3);
  CHECK(c.cell.member == 2);
  CHECK(c.from == 199);
  // A window that began before the latest naming ended takes the earlier one.
  CHECK(CarryPriorClear(named, 150, s, schema, kMembers).from == 99);
  // Nothing named, or its evidence gone: nothing carries.
  CHECK_FALSE(CarryPriorClear(named, 50, s, schema, kMembers).cell.valid());
  e.at(3, 2) = Shift(1500, 1);
  CHECK_FALSE(CarryPriorClear(named, 200, s, schema, kMembers).cell.valid());

  const TopCellChoice top = ChooseTopCell(OneCell(0, 0), s, schema, c.cell, c);
  CHECK(top.basis == TopCellBasis::kEvidence);
  CHECK(top.carried);
  CHECK(top.carried_from == 199);
}

TEST_CASE("suspects: promote moves a listed cell first, inserts an unlisted one",
          "[verdict_steps]") {
  std::vector<Suspect> s;
  for (int i = 0; i < 5; ++i) s.push_back(Suspect{.stage = 0, .rank = i});
  PromoteSuspect(&s, Suspect{.stage = 0, .rank = 3});
  CHECK(s[0].rank == 3);
  CHECK(s[1].rank == 0);
  PromoteSuspect(&s, Suspect{.stage = 2, .rank = 9});
  REQUIRE(s.size() == 5);
  CHECK(s[0].rank == 9);
  CHECK(s[4].rank == 2);  // rank 4 dropped
  LeadWith(&s, 0, 1);
  CHECK(s[0].rank == 1);
  LeadWith(&s, 5, 1);  // not listed: unchanged
  CHECK(s[0].rank == 1);
}

TEST_CASE("prior held cells: the latest window that ended before this one began",
          "[verdict_steps]") {
  const std::vector<PriorHeld> none;
  CHECK(PriorHeldCells(none, 100) == nullptr);  // a group's first window
  std::vector<PriorHeld> held(2);
  held[0] = PriorHeld{99, {{1, 2}}};
  held[1] = PriorHeld{199, {{3, 4}}};
  const std::vector<CellRef>* cells = PriorHeldCells(held, 200);
  REQUIRE(cells != nullptr);
  CHECK((*cells)[0].stage == 3);
  // A live window that began inside the last closed one takes the one before.
  cells = PriorHeldCells(held, 150);
  REQUIRE(cells != nullptr);
  CHECK((*cells)[0].stage == 1);
  CHECK(PriorHeldCells(held, 50) == nullptr);
  // A slot never filled (last_step -1) is no window.
  held[0] = PriorHeld{};
  CHECK(PriorHeldCells(held, 150) == nullptr);
}

}  // namespace
}  // namespace stagefrontier
