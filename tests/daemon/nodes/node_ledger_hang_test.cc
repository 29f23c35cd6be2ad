// The node ledger counts hangs (docs/node-ledger.md "Hangs"): a job's stall told to it
// (VerdictObserver::OnJobStall) charges one hang to each node of a rank named stuck or dead,
// once per stall, when it first alarms hung or dead; the count survives a reopen and shows in
// ListNodes and `sfctl nodes`.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "daemon/events/verdict_observer.h"
#include "daemon/nodes/node_ledger.h"
#include "daemon/nodes/nodes_reply.h"
#include "daemon/nodes/nodes_text.h"

namespace stagefrontier {
namespace {

std::string TempDir() {
  char dir[] = "/tmp/sf_ledger_hang_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  return dir;
}

std::unique_ptr<NodeLedger> OpenLedger(const std::string& dir) {
  NodeLedgerOptions o;
  o.path = dir + "/nodes.ledger";
  o.fsync = false;
  JournalOpenInfo info;
  auto ledger = NodeLedger::Open(o, &info);
  REQUIRE(ledger.ok());
  return std::move(*ledger);
}

void AddRank(v1::Stall* s, int32_t rank, const std::string& node, const std::string& role,
             const std::string& stage = "data", int64_t step = 150) {
  v1::StuckRank* r = s->add_ranks();
  r->set_rank(rank);
  r->set_node(node);
  r->set_role(role);
  r->set_stage(stage);
  r->set_step(step);
  r->set_open_ns(12'000'000'000);
}

// Rank 0 on n0 stuck in data at step 150; ranks 1 (n1) and 2 (n2) wait in grad_sync.
v1::Stall Hung(int64_t started = 1'000'000'000'000) {
  v1::Stall s;
  s.set_reason("hung");
  s.set_alarm(true);
  s.set_started_unix_ns(started);
  s.set_frontier_step(150);
  AddRank(&s, 0, "n0", "stuck");
  AddRank(&s, 1, "n1", "waiting", "grad_sync");
  AddRank(&s, 2, "n2", "waiting", "grad_sync");
  return s;
}

const NodeSummary* Find(const std::vector<NodeSummary>& nodes, const std::string& name) {
  for (const NodeSummary& n : nodes) {
    if (n.node == name) return &n;
  }
  return nullptr;
}

int64_t Hangs(const NodeLedger& ledger, const std::string& name) {
  const std::vector<NodeSummary> nodes = ledger.Nodes();
  const NodeSummary* n = Find(nodes, name);
  return n == nullptr ? 0 : n->hangs;
}

TEST_CASE("a hung stall charges the stuck rank's node once, not the waiting ranks' nodes") {
  const std::string dir = TempDir();
  auto ledger = OpenLedger(dir);
  VerdictObserver& observer = *ledger;
  observer.OnJobStall("job1", Hung(), 2'000'000'000'000);
  CHECK(Hangs(*ledger, "n0") == 1);
  CHECK(Hangs(*ledger, "n1") == 0);
  CHECK(Hangs(*ledger, "n2") == 0);
  const std::vector<NodeSummary> nodes = ledger->Nodes();
  const NodeSummary* n0 = Find(nodes, "n0");
  REQUIRE(n0 != nullptr);
  CHECK(n0->hangs_dead == 0);
  CHECK(n0->last_hang_ns == 2'000'000'000'000);
  CHECK(n0->last_hang == "job job1 rank 0 stage data step 150 (hung)");
  CHECK(nodes.front().node == "n0");  // no GPU-seconds anywhere: the hung node first

  // The same stall changing (a rank named dead now, its seconds grown) and ending: no more.
  v1::Stall changed = Hung();
  changed.set_reason("dead");
  changed.mutable_ranks(0)->set_role("dead");
  observer.OnJobStall("job1", changed, 2'001'000'000'000);
  v1::Stall ended = Hung();
  ended.set_ended(true);
  observer.OnJobStall("job1", ended, 2'002'000'000'000);
  CHECK(Hangs(*ledger, "n0") == 1);
  CHECK(ledger->counters().hangs == 1);
}

TEST_CASE("only an alarm with reason hung or dead is a hang") {
  const std::string dir = TempDir();
  auto ledger = OpenLedger(dir);
  v1::Stall quiet = Hung(1);
  quiet.set_alarm(false);  // not yet an alarm
  ledger->OnJobStall("job1", quiet, 10);
  for (const char* reason :
       {"desync", "collective", "group_wide_pause", "sidecar_lost", "unknown"}) {
    v1::Stall s = Hung(2);
    s.set_reason(reason);
    ledger->OnJobStall("job1", s, 20);
  }
  v1::Stall ended = Hung(3);
  ended.set_ended(true);
  ledger->OnJobStall("job1", ended, 30);
  v1::Stall nobody = Hung(4);
  nobody.clear_ranks();
  AddRank(&nobody, 1, "n1", "waiting");
  ledger->OnJobStall("job1", nobody, 40);
  CHECK(ledger->counters().hangs == 0);
  CHECK(ledger->Nodes().empty());

  // The same stall (its start) alarming hung later is charged then, once.
  ledger->OnJobStall("job1", Hung(1), 50);
  ledger->OnJobStall("job1", Hung(1), 60);
  CHECK(Hangs(*ledger, "n0") == 1);
}

TEST_CASE("hangs count per node across stalls and jobs; a dead rank counts as dead") {
  const std::string dir = TempDir();
  auto ledger = OpenLedger(dir);
  ledger->OnJobStall("job1", Hung(100), 1000);
  ledger->OnJobStall("job1", Hung(200), 2000);  // a second stall of the same job
  ledger->OnJobStall("job2", Hung(100), 3000);  // another job, same start: its own stall
  v1::Stall dead;
  dead.set_reason("dead");
  dead.set_alarm(true);
  dead.set_started_unix_ns(300);
  AddRank(&dead, 4, "n3", "stuck", "forward", 7);
  AddRank(&dead, 5, "n3", "dead", "", 7);  // two ranks of n3: one hang, dead
  AddRank(&dead, 6, "", "dead");           // no node known: unattributed
  ledger->OnJobStall("job3", dead, 4000);
  CHECK(Hangs(*ledger, "n0") == 3);
  CHECK(Hangs(*ledger, "n3") == 1);
  const std::vector<NodeSummary> nodes = ledger->Nodes();
  const NodeSummary* n3 = Find(nodes, "n3");
  REQUIRE(n3 != nullptr);
  CHECK(n3->hangs_dead == 1);
  CHECK(n3->last_hang == "job job3 rank 5 between steps step 7 (dead)");
  CHECK(ledger->counters().hangs == 4);
  CHECK(ledger->counters().unattributed == 1);
  // No GPU-seconds anywhere: most hangs first, in the summaries and the gauges alike.
  REQUIRE(nodes.size() >= 2);
  CHECK(nodes[0].node == "n0");
  const std::vector<NodeGauge> gauges = ledger->Gauges();
  REQUIRE(gauges.size() == nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    CHECK(gauges[i].node == nodes[i].node);
    CHECK(gauges[i].hangs == nodes[i].hangs);
  }
}

TEST_CASE("hangs survive a reopen, and a restored stall is not charged again") {
  const std::string dir = TempDir();
  {
    auto ledger = OpenLedger(dir);
    ledger->OnJobStall("job1", Hung(100), 1000);
    ledger->OnJobStall("job2", Hung(100), 2000);
    REQUIRE(ledger->Flush().ok());
  }
  auto ledger = OpenLedger(dir);
  CHECK(Hangs(*ledger, "n0") == 2);
  CHECK(ledger->counters().replay_skipped == 0);
  // A coordinator restarted during job2's stall tells it again when it changes: same start.
  ledger->OnJobStall("job2", Hung(100), 5000);
  CHECK(Hangs(*ledger, "n0") == 2);
  ledger->OnJobStall("job2", Hung(900), 6000);
  CHECK(Hangs(*ledger, "n0") == 3);
}

TEST_CASE("ListNodes and sfctl nodes show the hangs") {
  const std::string dir = TempDir();
  auto ledger = OpenLedger(dir);
  ledger->OnJobStall("job1", Hung(100), 1'764'130'000'000'000'000);
  v1::ListNodesReply reply;
  REQUIRE(FillListNodes(*ledger, v1::ListNodesRequest(), &reply).ok());
  REQUIRE(reply.nodes_size() == 1);
  const v1::NodeInfo& n = reply.nodes(0);
  CHECK(n.node() == "n0");
  CHECK(n.hangs() == 1);
  CHECK(n.hangs_dead() == 0);
  CHECK(n.last_hang_unix_ns() == 1'764'130'000'000'000'000);
  CHECK(n.last_hang() == "job job1 rank 0 stage data step 150 (hung)");
  const std::string text = RenderNodesText(reply);
  CHECK(text.find("HANGS") != std::string::npos);
  CHECK(text.find("n0: 1 (0 dead), last 2025-11-26T04:06:40Z: job job1 rank 0 stage data "
                  "step 150 (hung)") != std::string::npos);
  INFO(text);
  // The row: JOBS 0, then HANGS 1.
  CHECK(text.find("    0     1 -") != std::string::npos);
}

}  // namespace
}  // namespace stagefrontier
