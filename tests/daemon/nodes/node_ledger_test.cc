// The node ledger over a real file: charges in GPU-seconds, classes across jobs, restarts,
// duplicates, damage and bounds.
#include "daemon/nodes/node_ledger.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

namespace stagefrontier {
namespace {

std::string TempDir() {
  char dir[] = "/tmp/sf_ledger_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  return dir;
}

NodeLedgerOptions Options(const std::string& dir) {
  NodeLedgerOptions o;
  o.path = dir + "/nodes.ledger";
  o.fsync = false;
  return o;
}

// A window of `job` over nodes a, b, c; `slow` (if not empty) charged 10 ms on "data" with
// 7 ranks waiting.
v1::NodeWindow Window(const std::string& job, int64_t first, const std::string& slow) {
  v1::NodeWindow w;
  w.set_job(job);
  w.set_first_step(first);
  w.set_last_step(first + 9);
  w.set_world_size(8);
  w.set_label(slow.empty() ? "HEALTHY" : "CLEAR");
  for (const char* n : {"a", "b", "c"}) w.add_nodes(n);
  w.set_nodes_changed(true);
  w.set_wall_time_ns(1'000'000'000 * (first + 1));
  if (!slow.empty()) {
    v1::NodeCharge* c = w.add_charges();
    c->set_node(slow);
    c->set_stage("data");
    c->set_rank(3);
    c->set_excess_ns(10'000'000);
    c->set_waiting_ranks(7);
    c->set_share(0.9);
  }
  return w;
}

std::unique_ptr<NodeLedger> OpenLedger(const NodeLedgerOptions& o) {
  JournalOpenInfo info;
  auto l = NodeLedger::Open(o, &info);
  REQUIRE(l.ok());
  return std::move(*l);
}

TEST_CASE("a node slow in two jobs ranks first, chronic, with its GPU-seconds and both jobs") {
  const auto o = Options(TempDir());
  auto ledger = OpenLedger(o);
  for (int i = 0; i < 3; ++i) CHECK(ledger->Record(Window("job1", i * 10, "b")));
  for (int i = 0; i < 3; ++i) CHECK(ledger->Record(Window("job2", i * 10, "b")));
  CHECK(ledger->Record(Window("job2", 30, "")));
  const std::vector<NodeSummary> nodes = ledger->Nodes();
  REQUIRE(nodes.size() == 3);
  const NodeSummary& b = nodes[0];
  CHECK(b.node == "b");
  CHECK(b.cls == NodeClass::kChronic);
  CHECK(b.gpu_seconds == Approx(6 * 0.010 * 7));
  REQUIRE(b.stages.size() == 1);
  CHECK(b.stages[0].stage == "data");
  CHECK(b.stages[0].windows == 6);
  CHECK(b.jobs == std::vector<std::string>{"job1", "job2"});
  CHECK(b.jobs_charged == 2);
  CHECK(b.jobs_seen == 2);
  CHECK(b.windows == 7);
  CHECK(b.charged_windows == 6);
  CHECK(b.episodes == 1);  // the windows ran back to back across the two jobs
  CHECK(b.first_seen_ns == 1'000'000'000);
  CHECK(b.last_charged_ns == 21'000'000'000);
  for (size_t i = 1; i < nodes.size(); ++i) {
    CHECK(nodes[i].cls == NodeClass::kHealthy);
    CHECK(nodes[i].gpu_seconds == 0);
    CHECK(nodes[i].windows == 7);
  }
  // The gauges' view: the same nodes, order and figures.
  const std::vector<NodeGauge> gauges = ledger->Gauges();
  REQUIRE(gauges.size() == nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    CHECK(gauges[i].node == nodes[i].node);
    CHECK(gauges[i].cls == nodes[i].cls);
    CHECK(gauges[i].gpu_seconds == nodes[i].gpu_seconds);
    CHECK(gauges[i].charged_windows == nodes[i].charged_windows);
    CHECK(gauges[i].hangs == nodes[i].hangs);
  }
}

TEST_CASE("the ledger survives a restart: same figures, same classes, duplicates refused") {
  const auto o = Options(TempDir());
  std::vector<NodeSummary> before;
  {
    auto ledger = OpenLedger(o);
    for (int i = 0; i < 5; ++i) ledger->Record(Window("job1", i * 10, i % 2 ? "a" : "c"));
    REQUIRE(ledger->Flush().ok());
    before = ledger->Nodes();
  }
  auto ledger = OpenLedger(o);
  const std::vector<NodeSummary> after = ledger->Nodes();
  REQUIRE(after.size() == before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    CHECK(after[i].node == before[i].node);
    CHECK(after[i].gpu_seconds == before[i].gpu_seconds);
    CHECK(after[i].cls == before[i].cls);
    CHECK(after[i].windows == before[i].windows);
    CHECK(after[i].ewma == before[i].ewma);
  }
  // A job restored from its journal closes its old windows again: not counted twice.
  CHECK_FALSE(ledger->Record(Window("job1", 40, "a")));
  CHECK(ledger->counters().duplicate_windows == 1);
  CHECK(ledger->Record(Window("job1", 50, "a")));
}

TEST_CASE("unchanged node sets are not written again") {
  const auto o = Options(TempDir());
  off_t one = 0, two = 0;
  {
    auto ledger = OpenLedger(o);
    ledger->Record(Window("job1", 0, ""));
    REQUIRE(ledger->Flush().ok());
    struct stat st;
    REQUIRE(stat(o.path.c_str(), &st) == 0);
    one = st.st_size;
    ledger->Record(Window("job1", 10, ""));
    REQUIRE(ledger->Flush().ok());
    REQUIRE(stat(o.path.c_str(), &st) == 0);
    two = st.st_size;
  }
  CHECK(two - one < one - 16);  // the second record lacks the node names
  auto ledger = OpenLedger(o);
  for (const NodeSummary& n : ledger->Nodes()) CHECK(n.windows == 2);
}

TEST_CASE("a torn tail of the ledger loses only the torn record") {
  const auto o = Options(TempDir());
  {
    auto ledger = OpenLedger(o);
    for (int i = 0; i < 4; ++i) ledger->Record(Window("job1", i * 10, "a"));
    REQUIRE(ledger->Flush().ok());
  }
  struct stat st;
  REQUIRE(stat(o.path.c_str(), &st) == 0);
  REQUIRE(truncate(o.path.c_str(), st.st_size - 5) == 0);
  JournalOpenInfo info;
  auto ledger = NodeLedger::Open(o, &info);
  REQUIRE(ledger.ok());
  CHECK_FALSE(info.saved_tail.empty());
  CHECK((*ledger)->Nodes()[0].charged_windows == 3);
  CHECK((*ledger)->Record(Window("job1", 30, "a")));  // the lost window can be recorded again
}

TEST_CASE("charges without a node are counted, not charged; nodes past the bound are counted") {
  auto o = Options(TempDir());
  o.max_nodes = 2;
  auto ledger = OpenLedger(o);
  v1::NodeWindow w = Window("job1", 0, "");
  v1::NodeCharge* c = w.add_charges();
  c->set_excess_ns(5'000'000);
  c->set_waiting_ranks(7);
  ledger->Record(w);
  CHECK(ledger->counters().unattributed == 1);
  CHECK(ledger->Nodes().size() == 2);
  CHECK(ledger->counters().nodes_refused >= 1);
}

TEST_CASE("a minor charge costs GPU-seconds but does not count against the node's class") {
  const auto o = Options(TempDir());
  auto ledger = OpenLedger(o);
  for (int i = 0; i < 6; ++i) {
    v1::NodeWindow w = Window("job1", i * 10, "b");
    v1::NodeCharge* minor = w.add_charges();
    minor->set_node("a");
    minor->set_stage("grad_sync");
    minor->set_excess_ns(1'000'000);
    minor->set_waiting_ranks(7);
    minor->set_share(0.1);
    ledger->Record(w);
  }
  const std::vector<NodeSummary> nodes = ledger->Nodes();
  CHECK(nodes[0].node == "b");
  CHECK(nodes[0].cls == NodeClass::kChronic);
  CHECK(nodes[1].node == "a");
  CHECK(nodes[1].gpu_seconds == Approx(6 * 0.001 * 7));
  CHECK(nodes[1].charged_windows == 0);
  CHECK(nodes[1].cls == NodeClass::kHealthy);
  CHECK(nodes[1].stages[0].windows == 6);
}

TEST_CASE("class changes are announced once, live") {
  const auto o = Options(TempDir());
  auto ledger = OpenLedger(o);
  std::vector<std::string> seen;
  ledger->SetClassChange([&](const NodeSummary& n, NodeClass before) {
    seen.push_back(n.node + ":" + NodeClassName(before) + "->" + NodeClassName(n.cls));
  });
  for (int i = 0; i < 5; ++i) ledger->Record(Window("job1", i * 10, "b"));
  CHECK(seen == std::vector<std::string>{"b:healthy->transient", "b:transient->chronic"});
}

TEST_CASE("the machine under a node name is kept, written only when it changes") {
  const auto o = Options(TempDir());
  off_t once = 0, twice = 0;
  {
    auto ledger = OpenLedger(o);
    ledger->Record(Window("job1", 0, "b"));
    ledger->NoteHost("b", "gpu-host-17", "10.0.0.17", 5);
    REQUIRE(ledger->Flush().ok());
    struct stat st;
    REQUIRE(stat(o.path.c_str(), &st) == 0);
    once = st.st_size;
    ledger->NoteHost("b", "gpu-host-17", "10.0.0.17", 6);  // the same: nothing written
    REQUIRE(ledger->Flush().ok());
    REQUIRE(stat(o.path.c_str(), &st) == 0);
    twice = st.st_size;
  }
  CHECK(once == twice);
  auto ledger = OpenLedger(o);
  const NodeSummary b = ledger->Nodes()[0];
  CHECK(b.node == "b");
  CHECK(b.host == "gpu-host-17");
  CHECK(b.address == "10.0.0.17");
  ledger->NoteHost("b", "gpu-host-18", "10.0.0.18", 7);  // the name moved to another machine
  CHECK(ledger->Nodes()[0].host == "gpu-host-18");
}

TEST_CASE("a file that is not a ledger is refused and left alone") {
  const auto dir = TempDir();
  const auto o = Options(dir);
  const int fd = open(o.path.c_str(), O_CREAT | O_WRONLY, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "not a ledger at all", 19) == 19);
  close(fd);
  JournalOpenInfo info;
  auto ledger = NodeLedger::Open(o, &info);
  CHECK_FALSE(ledger.ok());
  struct stat st;
  REQUIRE(stat(o.path.c_str(), &st) == 0);
  CHECK(st.st_size == 19);
}

TEST_CASE("a bad class config is refused") {
  auto o = Options(TempDir());
  o.classes.lambda = 2;
  JournalOpenInfo info;
  CHECK(NodeLedger::Open(o, &info).status().code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stagefrontier
