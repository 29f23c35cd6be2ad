// A whole node named: a tie or a set of cells covering exactly one node's ranks becomes that
// node's CLEAR verdict; a subset, ranks of two nodes, a one-node job, unknown nodes, HEALTHY
// and group-wide verdicts are left alone.
#include "daemon/nodes/node_verdict.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace stagefrontier {
namespace {

const StageSchema kSchema = *StageSchema::Parse("data:io,fwd:compute,sync:sync");
// Ranks 0-3 on n0, 4-7 on n1.
const std::vector<std::string> kNodes = {"n0", "n0", "n0", "n0", "n1", "n1", "n1", "n1"};

Verdict Tie(std::vector<int32_t> ranks) {
  Verdict v;
  v.group = "job";
  v.label = VerdictLabel::kAmbiguous;
  v.reason = AmbiguityReason::kTie;
  v.candidate_ranks = ranks;
  v.explanation = "a tie.";
  v.settle = "a probe would settle it";
  for (int32_t r : ranks) {
    v.suspects.push_back({.stage = 1,
                          .rank = r,
                          .excess_ns = 4'000'000,
                          .share = 0.25,
                          .flagged_steps = 90,
                          .what_if_saving_ns = 0});
    v.excess_cells.push_back({.stage = 1, .rank = r, .excess_ns = 4'000'000, .flagged_steps = 90});
  }
  return v;
}

TEST_CASE("a tie over exactly one node's ranks is that node's CLEAR verdict") {
  Verdict v = Tie({4, 5, 6, 7});
  NameWholeNode(kSchema, kNodes, &v);
  CHECK(v.node == "n1");
  CHECK(v.label == VerdictLabel::kClear);
  CHECK(v.reason == AmbiguityReason::kNone);
  CHECK(v.candidate_ranks == std::vector<int32_t>{4, 5, 6, 7});
  CHECK(v.candidate_stages == std::vector<int32_t>{1});
  CHECK(v.settle.empty());
  CHECK_THAT(v.explanation, Catch::StartsWith("node n1: all 4 of its ranks slow in fwd"));
}

TEST_CASE("CLEAR on one rank whose node's other ranks carry comparable cells") {
  // The suspects list only some; the heatmap's cells hold the node's every rank.
  Verdict v = Tie({4, 5, 6, 7});
  v.label = VerdictLabel::kClear;
  v.reason = AmbiguityReason::kNone;
  v.candidate_ranks = {4};
  v.suspects.resize(2);
  v.excess_cells.push_back({.stage = 0, .rank = 1, .excess_ns = 9'000'000, .flagged_steps = 5});
  NameWholeNode(kSchema, kNodes, &v);
  CHECK(v.node == "n1");
  // Uneven shares of the node's steps still name it; a cell under an eighth of the top's
  // does not count, so the node's ranks are not all named.
  Verdict uneven = Tie({4, 5, 6, 7});
  uneven.label = VerdictLabel::kClear;
  uneven.reason = AmbiguityReason::kNone;
  uneven.excess_cells[2].excess_ns = 600'000;
  NameWholeNode(kSchema, kNodes, &uneven);
  CHECK(uneven.node == "n1");
  Verdict w = Tie({4, 5, 6, 7});
  w.label = VerdictLabel::kClear;
  w.reason = AmbiguityReason::kNone;
  w.excess_cells[3].excess_ns = 400'000;
  NameWholeNode(kSchema, kNodes, &w);
  CHECK(w.node.empty());
}

TEST_CASE("anything but exactly one node's ranks is left alone") {
  for (const std::vector<int32_t>& ranks :
       std::vector<std::vector<int32_t>>{{4, 5, 6}, {3, 4, 5, 6, 7}, {0, 4}}) {
    Verdict v = Tie(ranks);
    NameWholeNode(kSchema, kNodes, &v);
    CHECK(v.node.empty());
    CHECK(v.label == VerdictLabel::kAmbiguous);
  }
  // Every rank of the job on one node: the job's fault, not a node's among others.
  Verdict one = Tie({0, 1, 2, 3});
  NameWholeNode(kSchema, {"n0", "n0", "n0", "n0"}, &one);
  CHECK(one.node.empty());
  // A rank whose node is unknown.
  Verdict unknown = Tie({4, 5, 6, 7});
  std::vector<std::string> nodes = kNodes;
  nodes[6] = "";
  NameWholeNode(kSchema, nodes, &unknown);
  CHECK(unknown.node.empty());
  // One rank alone stays that rank's.
  Verdict single = Tie({4});
  single.label = VerdictLabel::kClear;
  NameWholeNode(kSchema, {"n0", "n0", "n0", "n0", "n1"}, &single);
  CHECK(single.node.empty());
  // Group-wide and HEALTHY verdicts.
  Verdict wide = Tie({4, 5, 6, 7});
  wide.group_wide = true;
  NameWholeNode(kSchema, kNodes, &wide);
  CHECK(wide.node.empty());
  Verdict healthy;
  NameWholeNode(kSchema, kNodes, &healthy);
  CHECK(healthy.node.empty());
}

TEST_CASE("cells of the ranks that waited do not name their node for another node's rank") {
  // Regression (node eval, seed 20261128, row 27): rank 5 (n1) slow in fwd, decided on rank
  // evidence; the frontier charged fwd to n0's ranks, which waited for it.
  Verdict v = Tie({0, 1, 2, 3});
  v.label = VerdictLabel::kClear;
  v.reason = AmbiguityReason::kNone;
  v.candidate_ranks = {5};
  v.suspects.insert(v.suspects.begin(), {.stage = 1,
                                         .rank = 5,
                                         .excess_ns = 1'000'000,
                                         .share = 0.05,
                                         .flagged_steps = 4,
                                         .what_if_saving_ns = 0});
  NameWholeNode(kSchema, kNodes, &v);
  CHECK(v.node.empty());
  CHECK(v.candidate_ranks == std::vector<int32_t>{5});
}

TEST_CASE("a role job's node is named from the deciding group's cells only") {
  // Regression (node eval control row 25, a dp-major 2x2 pipeline): rank 1's fwd alone was
  // slow (pp1), and pp0's rank 0, the same node, carried a noise cell in fwd over an eighth of
  // the top: "node n0: all 2 of its ranks slow in fwd".
  const std::vector<std::string> nodes = {"n0", "n0", "n1", "n1"};
  Verdict v = Tie({0, 1});
  v.label = VerdictLabel::kClear;
  v.reason = AmbiguityReason::kNone;
  v.candidate_ranks = {1};
  std::swap(v.suspects[0], v.suspects[1]);  // rank 1 first
  v.sync_group = "pp1";
  Verdict all = v;
  NameWholeNode(kSchema, nodes, &all);
  CHECK(all.node == "n0");  // without the groups: both cells count
  const std::vector<int32_t> pp1 = {1, 3};
  NameWholeNode(kSchema, nodes, &v, pp1);
  CHECK(v.node.empty());
  CHECK(v.candidate_ranks == std::vector<int32_t>{1});
}

}  // namespace
}  // namespace stagefrontier
