// The node ledger as one of a job's observers (JobOptions::observers): a closed window it is
// told of is charged as NodeWindowFromVerdict says, with the window's wall time, and the
// detector's conditions make it unreliable (no charge).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/events/verdict_observer.h"
#include "daemon/nodes/node_ledger.h"

namespace stagefrontier {
namespace {

const StageSchema kSchema = *StageSchema::Parse("data:io,forward:compute");

Verdict Clear(int64_t first) {
  Verdict v;
  v.group = "job";
  v.first_step = first;
  v.last_step = first + 99;
  v.label = VerdictLabel::kClear;
  v.suspects.push_back({/*stage=*/0, /*rank=*/3, /*excess_ns=*/50'000'000, 0.9, 40, 0});
  return v;
}

ClosedJobWindow Window(const Verdict& v, std::vector<std::string> unreliable) {
  ClosedJobWindow w;
  w.job = "job1";
  w.world_size = 8;
  w.verdict = &v;
  w.schema = &kSchema;
  w.unreliable = std::move(unreliable);
  w.rank_nodes = {"n0", "n0", "n1", "n1", "n2", "n2", "n2", "n2"};
  w.wall_time_ns = 7'000'000'000;
  return w;
}

TEST_CASE("a window told to the ledger charges the suspect's node; an unreliable one does not") {
  char dir[] = "/tmp/sf_ledger_obs_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  NodeLedgerOptions o;
  o.path = std::string(dir) + "/nodes.ledger";
  o.fsync = false;
  JournalOpenInfo info;
  auto ledger = NodeLedger::Open(o, &info);
  REQUIRE(ledger.ok());
  VerdictObserver& observer = **ledger;
  const Verdict first = Clear(100);
  observer.OnJobWindow(Window(first, {}));
  const Verdict second = Clear(200);
  observer.OnJobWindow(Window(second, {"clock_skew"}));
  observer.OnVerdictsAppended();  // nothing for the ledger
  const std::vector<NodeSummary> nodes = (*ledger)->Nodes();
  REQUIRE(nodes.size() == 3);
  CHECK(nodes[0].node == "n1");
  CHECK(nodes[0].gpu_seconds == Approx(0.35));  // 50 ms x 7 waiting ranks, once
  CHECK(nodes[0].windows == 2);
  CHECK(nodes[0].charged_windows == 1);
  CHECK(nodes[0].last_seen_ns == 7'000'000'000);
  CHECK((*ledger)->counters().windows == 2);
}

}  // namespace
}  // namespace stagefrontier
