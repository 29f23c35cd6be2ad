#include "daemon/nodes/node_window.h"

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

const StageSchema kSchema = *StageSchema::Parse("data:io,forward:compute");
const std::vector<std::string> kNodes = {"n0", "n0", "n1", "n1", "", "n2", "n2", "n2"};

Verdict Clear() {
  Verdict v;
  v.group = "job";
  v.first_step = 100;
  v.last_step = 199;
  v.label = VerdictLabel::kClear;
  v.suspects.push_back({/*stage=*/0, /*rank=*/3, /*excess_ns=*/50'000'000, 0.9, 40, 0});
  return v;
}

TEST_CASE("a CLEAR job window charges its suspect to the rank's node, all others waiting") {
  const v1::NodeWindow w = NodeWindowFromVerdict("job1", 8, kSchema, Clear(), kNodes, false, 7);
  CHECK(w.job() == "job1");
  CHECK(w.first_step() == 100);
  CHECK(w.label() == "CLEAR");
  CHECK(w.wall_time_ns() == 7);
  REQUIRE(w.charges_size() == 1);
  CHECK(w.charges(0).node() == "n1");
  CHECK(w.charges(0).stage() == "data");
  CHECK(w.charges(0).rank() == 3);
  CHECK(w.charges(0).excess_ns() == 50'000'000);
  CHECK(w.charges(0).waiting_ranks() == 7);
  CHECK(w.charges(0).share() == 0.9);
  CHECK(std::vector<std::string>(w.nodes().begin(), w.nodes().end()) ==
        std::vector<std::string>{"n0", "n1", "n2"});
  CHECK(w.nodes_changed());
  CHECK(WastedGpuSeconds(50'000'000, 7) == Approx(0.35));
}

TEST_CASE("the window lists each node once, sorted, however its ranks are interleaved") {
  // Ranks placed round-robin (no two neighbours on one node), runs, and unknown ranks between.
  const std::vector<std::string> nodes = {"n2", "n0", "n1", "n2", "", "n0", "n0", "", "n1", "n2"};
  const v1::NodeWindow w = NodeWindowFromVerdict("job1", 10, kSchema, Clear(), nodes, false, 7);
  CHECK(std::vector<std::string>(w.nodes().begin(), w.nodes().end()) ==
        std::vector<std::string>{"n0", "n1", "n2"});
}

TEST_CASE("a verdict naming a whole node charges the node once, with its ranks' excess") {
  Verdict v = Clear();
  v.node = "n2";
  v.suspects = {{1, 5, 30'000'000, 0.3, 90, 0}, {1, 6, 30'000'000, 0.3, 90, 0}};
  v.excess_cells = {{.stage = 1, .rank = 5, .excess_ns = 30'000'000, .flagged_steps = 90},
                    {.stage = 1, .rank = 6, .excess_ns = 30'000'000, .flagged_steps = 90},
                    {.stage = 1, .rank = 7, .excess_ns = 30'000'000, .flagged_steps = 90},
                    {.stage = 0, .rank = 7, .excess_ns = 5'000'000, .flagged_steps = 9},
                    {.stage = 1, .rank = 0, .excess_ns = 1'000'000, .flagged_steps = 2}};
  v.total_excess_ns = 100'000'000;
  const v1::NodeWindow w = NodeWindowFromVerdict("job1", 8, kSchema, v, kNodes, false, 7);
  REQUIRE(w.charges_size() == 1);
  CHECK(w.charges(0).node() == "n2");
  CHECK(w.charges(0).stage() == "forward");
  CHECK(w.charges(0).excess_ns() == 90'000'000);
  CHECK(w.charges(0).share() == Approx(0.9));
  CHECK(w.charges(0).waiting_ranks() == 7);
}

TEST_CASE("windows that do not say whose fault it is charge nothing, but list the nodes") {
  Verdict healthy = Clear();
  healthy.label = VerdictLabel::kHealthy;
  Verdict ambiguous = Clear();
  ambiguous.label = VerdictLabel::kAmbiguous;
  ambiguous.reason = AmbiguityReason::kTie;
  Verdict group_wide = Clear();
  group_wide.group_wide = true;
  Verdict sync_group = Clear();
  sync_group.group = "pp0";
  for (const Verdict& v : {healthy, ambiguous, group_wide, sync_group}) {
    const v1::NodeWindow w = NodeWindowFromVerdict("job1", 8, kSchema, v, kNodes, false, 0);
    CHECK(w.charges_size() == 0);
    CHECK(w.nodes_size() == 3);
  }
  const v1::NodeWindow unreliable =
      NodeWindowFromVerdict("job1", 8, kSchema, Clear(), kNodes, /*unreliable=*/true, 0);
  CHECK(unreliable.charges_size() == 0);
  CHECK(unreliable.unreliable());
}

TEST_CASE("a suspect whose node is unknown is charged with an empty node") {
  Verdict v = Clear();
  v.suspects[0].rank = 4;                        // no node known
  v.suspects.push_back({1, 99, 10, 0.1, 1, 0});  // rank outside the table
  const v1::NodeWindow w = NodeWindowFromVerdict("job1", 8, kSchema, v, kNodes, false, 0);
  REQUIRE(w.charges_size() == 2);
  CHECK(w.charges(0).node().empty());
  CHECK(w.charges(1).node().empty());
  CHECK(w.charges(1).stage() == "forward");
}

}  // namespace
}  // namespace stagefrontier
