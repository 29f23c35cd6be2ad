// The node steps composed (NameNode): a CLEAR on one rank whose node the node shift can
// measure is not turned into the node's by the cells alone (node eval seed 20261136, control
// row 27: one slow rank's node named through its node peers' cells); where the node cannot
// be measured (it holds its whole group), the cells still name it; a tie over a node's ranks
// is the node's either way.
#include "daemon/nodes/node_naming.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace stagefrontier {
namespace {

const StageSchema kSchema = *StageSchema::Parse("data:io,fwd:compute,sync:sync");

// CLEAR on rank 1 in fwd, with cells of an eighth or more on ranks 0 and 2 too.
Verdict ClearOnRank1() {
  Verdict v;
  v.group = "job";
  v.label = VerdictLabel::kClear;
  v.candidate_ranks = {1};
  v.explanation = "one rank.";
  v.suspects.push_back({.stage = 1,
                        .rank = 1,
                        .excess_ns = 8'000'000,
                        .share = 0.6,
                        .flagged_steps = 90,
                        .what_if_saving_ns = 0});
  for (int32_t r : {0, 1, 2}) {
    v.excess_cells.push_back(
        {.stage = 1, .rank = r, .excess_ns = r == 1 ? 8'000'000 : 2'000'000, .flagged_steps = 20});
  }
  return v;
}

TEST_CASE("a CLEAR on one rank of a node measurable against peers elsewhere stays the rank's") {
  // Ranks 0-2 on n0, 3-5 on n1: one group, half on each node.
  const RankPlacement p{.rank_nodes = {"n0", "n0", "n0", "n1", "n1", "n1"}, .group_of_rank = {}};
  Verdict v = ClearOnRank1();
  NameNode(kSchema, p, {}, {}, NodeShiftThresholds{}, &v);  // no steps: nothing measured
  CHECK(v.node.empty());
  CHECK(v.candidate_ranks == std::vector<int32_t>{1});
}

TEST_CASE("where the node cannot be measured, its ranks' cells still name it") {
  // Two groups, each wholly on one node: no peers elsewhere to compare the node with.
  const RankPlacement p{.rank_nodes = {"n0", "n0", "n0", "n1", "n1", "n1"},
                        .group_of_rank = {0, 0, 0, 1, 1, 1}};
  Verdict v = ClearOnRank1();
  NameNode(kSchema, p, {}, {}, NodeShiftThresholds{}, &v);
  CHECK(v.node == "n0");
  CHECK(v.candidate_ranks == std::vector<int32_t>{0, 1, 2});
}

TEST_CASE("a tie over a measurable node's ranks is the node's") {
  const RankPlacement p{.rank_nodes = {"n0", "n0", "n0", "n1", "n1", "n1"}, .group_of_rank = {}};
  Verdict v = ClearOnRank1();
  v.label = VerdictLabel::kAmbiguous;
  v.reason = AmbiguityReason::kTie;
  v.candidate_ranks = {0, 1, 2};
  NameNode(kSchema, p, {}, {}, NodeShiftThresholds{}, &v);
  CHECK(v.node == "n0");
  CHECK(v.label == VerdictLabel::kClear);
}

}  // namespace
}  // namespace stagefrontier
