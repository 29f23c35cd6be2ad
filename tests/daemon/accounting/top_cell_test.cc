// Verdict step 5: the top-cell choice (strong evidence, carry-over, own stage) and the
// suspect reordering it implies.
#include "daemon/accounting/top_cell.h"

#include <catch2/catch.hpp>
#include <initializer_list>
#include <tuple>

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

// A table of several cells: (stage, member, excess), listed largest first.
ExcessTable Cells(std::initializer_list<std::tuple<int, int, double>> cells) {
  ExcessTable t = OneCell(0, 0, 0);
  t.order.clear();
  t.total = 0;
  for (const auto& [stage, member, excess] : cells) {
    t.cell[t.Index(stage, member)] = excess;
    t.total += excess;
    t.order.push_back(t.Index(stage, member));
  }
  return t;
}

TEST_CASE("confirmed: a lesser charged cell, supported here and held before, is named",
          "[verdict_steps]") {
  // A tensor-parallel job's intermittent bwd fault: the frontier charges the noisier compute
  // stage of another member most, while the faulty cell stands at z 3.4, window after window.
  const StageSchema schema = Schema();
  RankEvidenceTable e(4, kMembers);
  e.at(1, 1) = Shift(2000, 3.4);
  const RankSupport s(e, schema, kThresholds);
  const ExcessTable t = Cells({{1, 0, 4000}, {1, 1, 2000}, {0, 2, 1000}});
  const PriorHeld before{99, {{1, 1}}, {}};
  const CellRef confirmed = ConfirmedChargedCell(t, s, schema, &before, 0.1);
  CHECK(confirmed == CellRef{1, 1});
  const TopCellChoice top = ChooseTopCell(t, s, schema, {}, {}, confirmed);
  CHECK(top.basis == TopCellBasis::kCharged);
  CHECK(top.confirmed);
  CHECK(top.cell == CellRef{1, 1});
  // Strong evidence elsewhere goes first.
  CHECK(ChooseTopCell(t, s, schema, CellRef{3, 2}, {}, confirmed).cell == CellRef{3, 2});

  // Not held in the window before, or no window before, or too small a share: the group's.
  const PriorHeld other{99, {{1, 2}}, {}};
  CHECK_FALSE(ConfirmedChargedCell(t, s, schema, &other, 0.1).valid());
  CHECK_FALSE(ConfirmedChargedCell(t, s, schema, nullptr, 0.1).valid());
  CHECK_FALSE(ConfirmedChargedCell(t, s, schema, &before, 0.3).valid());
  CHECK(ChooseTopCell(t, s, schema, {}, {}, {}).basis == TopCellBasis::kGroup);
}

TEST_CASE("confirmed: a shift that leans in two windows, at kPersistZ combined",
          "[verdict_steps]") {
  const StageSchema schema = Schema();
  RankEvidenceTable e(4, kMembers);
  e.at(1, 1) = Shift(2000, 2.9);  // short of support (3) here
  const RankSupport s(e, schema, kThresholds);
  CHECK(s.Leans(1, 1));
  CHECK_FALSE(s.Supported(1, 1));
  const ExcessTable t = Cells({{1, 1, 4000}, {0, 2, 1000}});
  // (2.9 + 2.2) / sqrt 2 = 3.61: confirmed, although the top cell itself is unsupported.
  const PriorHeld leaned{99, {}, {{{1, 1}, 2.2}}};
  CHECK(ConfirmedChargedCell(t, s, schema, &leaned, 0.1) == CellRef{1, 1});
  // (2.9 + 2.0) / sqrt 2 = 3.46: not (a healthy run's cell reached 3.39).
  const PriorHeld weaker{99, {}, {{{1, 1}, 2.0}}};
  CHECK_FALSE(ConfirmedChargedCell(t, s, schema, &weaker, 0.1).valid());
  // Another cell leaned before: not this one.
  const PriorHeld elsewhere{99, {}, {{{1, 2}, 4.0}}};
  CHECK_FALSE(ConfirmedChargedCell(t, s, schema, &elsewhere, 0.1).valid());
  // Under kLeanZ here, or immaterial: not, whatever the window before.
  RankEvidenceTable low(4, kMembers);
  low.at(1, 1) = Shift(2000, 1.9);
  const RankSupport ls(low, schema, kThresholds);
  const PriorHeld strong_before{99, {{1, 1}}, {{{1, 1}, 6.0}}};
  CHECK_FALSE(ConfirmedChargedCell(t, ls, schema, &strong_before, 0.1).valid());
  RankEvidenceTable small(4, kMembers);
  small.at(1, 1) = Shift(900, 2.9);  // material is 1000
  const RankSupport ss(small, schema, kThresholds);
  CHECK_FALSE(ConfirmedChargedCell(t, ss, schema, &strong_before, 0.1).valid());
}

TEST_CASE("confirmed: a late arrival at a wait names the rank's own confirmed stage",
          "[verdict_steps]") {
  const StageSchema schema = Schema();
  RankEvidenceTable e(4, kMembers);
  e.at(3, 1) = Shift(2000, 3.4);  // optimizer, the rank's own stage
  e.at(0, 1) = Shift(1500, 3.2);  // data, confirmed too but a smaller shift
  const RankSupport s(e, schema, kThresholds);
  // compute on member 0 most (unsupported), then member 1 late at the sync.
  const ExcessTable t = Cells({{1, 0, 4000}, {2, 1, 2500}});
  const PriorHeld before{99, {{3, 1}, {0, 1}}, {}};
  CHECK(ConfirmedChargedCell(t, s, schema, &before, 0.1) == CellRef{3, 1});
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

TEST_CASE("prior window: the latest that ended before this one began", "[verdict_steps]") {
  const std::vector<PriorHeld> none;
  CHECK(PriorWindow(none, 100) == nullptr);  // a group's first window
  std::vector<PriorHeld> held(2);
  held[0] = PriorHeld{99, {{1, 2}}, {}};
  held[1] = PriorHeld{199, {{3, 4}}, {{{3, 4}, 2.5}}};
  const PriorHeld* prior = PriorWindow(held, 200);
  REQUIRE(prior != nullptr);
  CHECK(prior->cells[0].stage == 3);
  CHECK(prior->leaning[0].z == 2.5);
  // A live window that began inside the last closed one takes the one before.
  prior = PriorWindow(held, 150);
  REQUIRE(prior != nullptr);
  CHECK(prior->cells[0].stage == 1);
  CHECK(PriorWindow(held, 50) == nullptr);
  // A slot never filled (last_step -1) is no window.
  held[0] = PriorHeld{};
  CHECK(PriorWindow(held, 150) == nullptr);
}

}  // namespace
}  // namespace stagefrontier
