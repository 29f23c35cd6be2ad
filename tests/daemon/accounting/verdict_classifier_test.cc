// Verdict step 7: each classification rule on its own, on hand-made evidence.
#include "daemon/accounting/verdict_classifier.h"

#include <catch2/catch.hpp>

#include "tests/daemon/accounting/window_fixture.h"

namespace stagefrontier::testing {
namespace {

constexpr int kMembers = 4;

// Everything a rule reads, with a supported top cell (compute, member 1) by default.
struct Fixture {
  explicit Fixture(const std::string& schema = "data:io,compute:compute,sync:sync,grad:mixed")
      : builder(kMembers, schema) {
    builder.Step([](int, int) { return 1'000'000; });
    table.stages = 4;
    table.members = kMembers;
    table.cell.assign(16, 0);
    table.cell_steps.assign(16, 0);
    table.stage_total.assign(4, 0);
    table.stage_unresolved.assign(4, 0);
    AddCell(1, 1, 8000);
    evidence_table.at(1, 1) = RankEvidence{.shift_ns = 5000, .z = 6, .steps = 100};
  }
  void AddCell(int k, int m, double excess) {
    table.cell[table.Index(k, m)] = excess;
    table.stage_total[k] += excess;
    table.total += excess;
    table.order.push_back(table.Index(k, m));
  }
  bool Run(VerdictRule rule) {
    const RankSupport support(evidence_table, builder.schema(), {3, 5, 1000});
    const LastArrivers arrivers(builder.window(), builder.schema(), members, config);
    const ClassifyContext c{builder.schema(), config,   members, table, support,
                            arrivers,         evidence, rivals,  top,   &builder.window()};
    verdict.label = VerdictLabel::kAmbiguous;
    return rule(c, &verdict, &decision);
  }

  WindowBuilder builder;
  EngineConfig config;
  GroupMembers members{{0, 1, 2, 3}, {}};
  ExcessTable table;
  RankEvidenceTable evidence_table{4, kMembers};
  TopCellEvidence evidence;
  Rivals rivals{{1}, {}};
  CellRef top{1, 1};
  Verdict verdict;
  VerdictDecision decision;
};

TEST_CASE("clear rule: CLEAR on the top cell", "[verdict_steps]") {
  Fixture f;
  CHECK(f.Run(ClearRule));
  CHECK(f.verdict.label == VerdictLabel::kClear);
  CHECK(f.verdict.candidate_ranks == std::vector<int32_t>{1});
  CHECK(f.verdict.candidate_stages == std::vector<int32_t>{1});
  CHECK(f.decision.kind == VerdictKind::kClear);
}

TEST_CASE("mixed-sync rule: mostly unresolved excess in a mixed stage", "[verdict_steps]") {
  Fixture f;
  CHECK_FALSE(f.Run(MixedSyncRule));  // compute is not mixed
  f.top = {3, 2};
  f.AddCell(3, 2, 6000);
  f.table.stage_unresolved[3] = 2000;
  CHECK_FALSE(f.Run(MixedSyncRule));  // a third unresolved: the probe resolved the rest
  f.table.stage_unresolved[3] = 3000;
  f.rivals.co_leaders = {2, 3};
  CHECK(f.Run(MixedSyncRule));
  CHECK(f.verdict.reason == AmbiguityReason::kMixedSync);
  CHECK(f.verdict.candidate_ranks == std::vector<int32_t>{2, 3});
  CHECK(f.decision.stage_excess == 6000);
}

TEST_CASE("co-leader rule: two co-leaders and no probe: TIE", "[verdict_steps]") {
  Fixture f;
  CHECK_FALSE(f.Run(CoLeaderTieRule));
  f.rivals.co_leaders = {1, 2};
  CHECK(f.Run(CoLeaderTieRule));
  CHECK(f.verdict.reason == AmbiguityReason::kTie);
  CHECK(f.verdict.candidate_ranks == std::vector<int32_t>{1, 2});
  CHECK_FALSE(f.decision.whole_group_tied);
  f.rivals.co_leaders = {0, 1, 2, 3};
  CHECK(f.Run(CoLeaderTieRule));
  CHECK(f.decision.whole_group_tied);
}

TEST_CASE("split rule: other large supported cells make a SPLIT", "[verdict_steps]") {
  Fixture f;
  CHECK_FALSE(f.Run(SplitRule));
  f.AddCell(0, 3, 4000);
  f.rivals.large = {f.table.Index(0, 3)};
  f.decision.share = 8000.0 / 12000;
  CHECK(f.Run(SplitRule));
  CHECK(f.verdict.reason == AmbiguityReason::kSplit);
  CHECK(f.verdict.candidate_ranks == std::vector<int32_t>{1, 3});
  CHECK(f.verdict.candidate_stages == std::vector<int32_t>{1, 0});
  REQUIRE(f.decision.split.size() == 2);
  CHECK(f.decision.split[1].share == Approx(1.0 / 3));
}

TEST_CASE("margin-tie rule: a lead within noise over supported ranks", "[verdict_steps]") {
  Fixture f;
  f.verdict.median_margin_ns = 500;
  f.verdict.tie_tolerance_ns = 400;
  CHECK_FALSE(f.Run(MarginTieRule));  // the lead is beyond noise
  f.verdict.tie_tolerance_ns = 600;
  f.evidence.tied_with = {{2, 30}, {3, 10}};
  CHECK(f.Run(MarginTieRule));  // tied ranks lack support: CLEAR
  CHECK(f.decision.kind == VerdictKind::kClear);
  f.evidence_table.at(1, 3) = RankEvidence{.shift_ns = 4000, .z = 4, .steps = 100};
  f.verdict.label = VerdictLabel::kAmbiguous;
  CHECK(f.Run(MarginTieRule));
  CHECK(f.decision.kind == VerdictKind::kMarginTie);
  CHECK(f.verdict.label == VerdictLabel::kAmbiguous);
  CHECK(f.verdict.candidate_ranks == std::vector<int32_t>{1, 3});
}

TEST_CASE("concurrent rule: rarely the sole last arriver, others late too", "[verdict_steps]") {
  Fixture f("data:io,compute:compute,sync:sync,opt:compute");  // no mixed stage: always supported
  f.verdict.wait_agreement = -1;
  CHECK_FALSE(f.Run(ConcurrentRule));  // no wait evidence
  f.verdict.wait_agreement = 0.3;
  f.evidence.also_late = {{0, 5}, {2, 20}};
  CHECK(f.Run(ConcurrentRule));  // the others lack support anywhere: CLEAR
  CHECK(f.decision.kind == VerdictKind::kClear);
  f.evidence_table.at(0, 0) = RankEvidence{.shift_ns = 4000, .z = 4, .steps = 100};
  f.evidence_table.at(0, 2) = RankEvidence{.shift_ns = 4000, .z = 4, .steps = 100};
  CHECK(f.Run(ConcurrentRule));
  CHECK(f.decision.kind == VerdictKind::kConcurrent);
  CHECK(f.verdict.reason == AmbiguityReason::kConcurrent);
  CHECK(f.verdict.candidate_ranks == std::vector<int32_t>{1});
  CHECK(f.verdict.concurrent_ranks == std::vector<int32_t>{2, 0});  // most often late first
}

TEST_CASE("concurrent rule: a rank late only in a pipeline transfer is not a second delay",
          "[verdict_steps]") {
  // Regression (pipeline eval, seed 20261130): 3 of 40 single faults read CONCURRENT, the
  // other rank "late too" supported only by its own transfers (its neighbours' time).
  Fixture f("data:io,recv:p2p,sync:sync,opt:compute");
  f.top = {0, 1};
  f.verdict.wait_agreement = 0.1;
  f.evidence.also_late = {{2, 20}};
  f.evidence_table.at(1, 2) = RankEvidence{.shift_ns = 4000, .z = 8, .steps = 100};
  CHECK(f.Run(ConcurrentRule));
  CHECK(f.decision.kind == VerdictKind::kClear);
  f.evidence_table.at(3, 2) = RankEvidence{.shift_ns = 4000, .z = 8, .steps = 100};  // own work
  f.verdict.label = VerdictLabel::kAmbiguous;
  CHECK(f.Run(ConcurrentRule));
  CHECK(f.decision.kind == VerdictKind::kConcurrent);
}

TEST_CASE("p2p-neighbour rule: a transfer charged but rarely late at the next wait",
          "[verdict_steps]") {
  // Regression (pipeline and node evals): a healthy pipeline's send_act read CLEAR, charged in
  // 2-8 steps, the last to arrive at the next wait in 0% of them.
  Fixture f("data:io,send:p2p,sync:sync,opt:compute");
  f.verdict.wait_agreement = 0.0;
  CHECK(f.Run(P2pNeighbourRule));
  CHECK(f.verdict.label == VerdictLabel::kHealthy);
  CHECK(f.verdict.candidate_ranks.empty());
  CHECK(f.decision.kind == VerdictKind::kP2pNeighbour);
  f.verdict.label = VerdictLabel::kAmbiguous;
  f.verdict.wait_agreement = 0.6;  // it did hold the group back
  CHECK_FALSE(f.Run(P2pNeighbourRule));
  f.verdict.wait_agreement = -1;  // no wait evidence
  CHECK_FALSE(f.Run(P2pNeighbourRule));
  Fixture compute("data:io,compute:compute,sync:sync,opt:compute");  // not a transfer
  compute.verdict.wait_agreement = 0.0;
  CHECK_FALSE(compute.Run(P2pNeighbourRule));
}

TEST_CASE("pipeline-wait rule: late at a pipeline's sync stage within noise", "[verdict_steps]") {
  // Regression (pipeline eval, 1000-step healthy runs): a healthy 4x2 pipeline's last stage
  // read CLEAR on its dp_sync, leading by 0.63 ms with noise 7.16 ms, no own stage slower.
  Fixture f("data:io,recv:p2p,sync:sync,opt:compute");
  f.top = {2, 1};
  f.verdict.median_margin_ns = 630'000;
  f.verdict.tie_tolerance_ns = 7'160'000;
  CHECK(f.Run(PipelineWaitRule));
  CHECK(f.verdict.label == VerdictLabel::kHealthy);
  CHECK(f.verdict.candidate_ranks.empty());
  CHECK(f.decision.kind == VerdictKind::kPipelineWait);
  f.verdict.label = VerdictLabel::kAmbiguous;
  f.verdict.median_margin_ns = 8'000'000;  // beyond noise: it held its group back
  CHECK_FALSE(f.Run(PipelineWaitRule));
  f.verdict.median_margin_ns = 630'000;
  f.top = {3, 1};  // not a sync stage
  CHECK_FALSE(f.Run(PipelineWaitRule));
  Fixture dp("data:io,compute:compute,sync:sync,opt:compute");  // no pipeline transfer
  dp.top = {2, 1};
  dp.verdict.median_margin_ns = 630'000;
  dp.verdict.tie_tolerance_ns = 7'160'000;
  CHECK_FALSE(dp.Run(PipelineWaitRule));
}

TEST_CASE("collective-exit rule: late at a later sync stage, nothing of its own between",
          "[verdict_steps]") {
  // Regression (pipeline eval with a job-wide all-reduce, seed 20261190): a healthy 2x2
  // pipeline read CLEAR on rank 3's loss_sync, 0.68 ms late (noise 0.58 ms) and costing 0.48 ms
  // of a 12 ms step: it left dp_sync late (a 2-rank Gloo all-reduce on busy cores), its apply
  // no slower than its peer's.
  Fixture f("fwd:compute,dp_sync:sync,apply:compute,loss_sync:sync");
  f.top = {3, 1};
  f.AddCell(3, 1, 48'000'000);
  f.verdict.exposed_ns = 1'200'000'000;  // 4% of it
  f.verdict.wait_agreement = 1.0;
  CHECK(f.Run(CollectiveExitRule));
  CHECK(f.verdict.label == VerdictLabel::kHealthy);
  CHECK(f.verdict.candidate_ranks.empty());
  CHECK(f.decision.kind == VerdictKind::kCollectiveExit);
  CHECK(f.decision.previous_wait == 1);
  f.verdict.label = VerdictLabel::kAmbiguous;
  f.evidence_table.at(2, 1) = RankEvidence{.shift_ns = 5000, .z = 6, .steps = 100};
  CHECK_FALSE(f.Run(CollectiveExitRule));  // its apply is slower: its own work, not the exit
  f.evidence_table.at(2, 1) = RankEvidence{};
  f.verdict.exposed_ns = 900'000'000;  // the late exit costs over 5% of the step: still named
  CHECK_FALSE(f.Run(CollectiveExitRule));
  f.verdict.exposed_ns = 1'200'000'000;
  f.verdict.wait_agreement = 0.3;  // not the last to arrive in most charged steps
  CHECK_FALSE(f.Run(CollectiveExitRule));
  f.verdict.wait_agreement = 1.0;
  f.top = {1, 1};  // the step's first wait: a late start there is time lost between steps
  CHECK_FALSE(f.Run(CollectiveExitRule));
  f.top = {2, 1};  // not a sync stage
  CHECK_FALSE(f.Run(CollectiveExitRule));
  Fixture p2p("fwd:compute,dp_sync:sync,send:p2p,loss_sync:sync");  // a transfer between
  p2p.top = {3, 1};
  p2p.AddCell(3, 1, 48'000'000);
  p2p.verdict.exposed_ns = 1'200'000'000;
  p2p.verdict.wait_agreement = 1.0;
  CHECK_FALSE(p2p.Run(CollectiveExitRule));
}

TEST_CASE("late-exit rule: the charged peer's late start is another rank's late exit",
          "[verdict_steps]") {
  // Simulator, a 2x2 pipeline ending each step with a job-wide collective: rank 3 leaving
  // dp_sync 2 ms late read CLEAR on (dp_sync, rank 2), its peer, as a late start.
  Fixture f("fwd:compute,dp_sync:sync,apply:compute,loss_sync:sync");
  for (int i = 0; i < 40; ++i) {
    const int64_t jitter = (i % 5) * 20'000;
    f.builder.Step([&](int m, int k) -> int64_t {
      if (k == 1) return m == 1 ? 5'000'000 + jitter : 3'000'000;
      if (k == 3) return m == 1 ? 1'000'000 - jitter : 3'000'000;
      return 1'000'000;
    });
  }
  f.top = {1, 0};  // the frontier charged member 0's dp_sync
  f.AddCell(1, 0, 41 * 2'000'000.0);
  f.decision.window_steps = 41;
  f.verdict.exposed_ns = 41 * 10'000'000LL;  // the late exit is 20% of the step
  CHECK(f.Run(LateExitRule));
  CHECK(f.verdict.label == VerdictLabel::kClear);
  CHECK(f.verdict.candidate_ranks == std::vector<int32_t>{1});
  CHECK(f.verdict.candidate_stages == std::vector<int32_t>{1});
  CHECK(f.decision.kind == VerdictKind::kLateExit);
  CHECK(f.decision.exit.rank == 1);
  CHECK(f.decision.exit.charged_rank == 0);
  CHECK(f.decision.exit.next_wait == 3);
  f.verdict.exposed_ns = 41 * 100'000'000LL;  // 2% of the step: the collective's spread
  CHECK(f.Run(LateExitRule));
  CHECK(f.verdict.label == VerdictLabel::kHealthy);
  CHECK(f.verdict.candidate_ranks.empty());
  CHECK(f.decision.kind == VerdictKind::kExitSpread);
  f.table.cell[f.table.Index(1, 0)] = 41 * 5'000'000.0;  // charged far more than the lag
  CHECK_FALSE(f.Run(LateExitRule));
  f.table.cell[f.table.Index(1, 0)] = 41 * 2'000'000.0;
  f.top = {2, 0};  // not a sync stage
  CHECK_FALSE(f.Run(LateExitRule));
  f.top = {1, 1};  // the charged rank is the one that left late: not this rule's case
  f.AddCell(1, 1, 41 * 2'000'000.0);
  CHECK_FALSE(f.Run(LateExitRule));
  Fixture even("fwd:compute,dp_sync:sync,apply:compute,loss_sync:sync");  // nobody left late
  for (int i = 0; i < 40; ++i) even.builder.Step([](int, int) { return 1'000'000; });
  even.top = {1, 0};
  even.AddCell(1, 0, 41 * 2'000'000.0);
  even.decision.window_steps = 41;
  even.verdict.exposed_ns = 41 * 10'000'000LL;
  CHECK_FALSE(even.Run(LateExitRule));
}

TEST_CASE("rule order: the first rule that claims the window decides", "[verdict_steps]") {
  const std::vector<VerdictRule>& rules = ChargedCellRules();
  REQUIRE(rules.size() == 10);
  CHECK(rules.front() == &MixedSyncRule);
  CHECK(rules[1] == &P2pNeighbourRule);
  CHECK(rules[2] == &LateExitRule);      // before a tie can name the charged peer
  CHECK(rules[5] == &PipelineWaitRule);  // before a margin tie or CLEAR can name the rank
  CHECK(rules[6] == &CollectiveExitRule);
  CHECK(rules.back() == &ClearRule);
}

}  // namespace
}  // namespace stagefrontier::testing
