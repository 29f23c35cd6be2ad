// The drain hook with real commands: dry run, execution with the evidence in the
// environment, the rate limit, failures retried, hung commands killed, unsafe names refused.
#include "daemon/nodes/drain_hook.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

namespace stagefrontier {
namespace {

std::string TempDir() {
  char dir[] = "/tmp/sf_drain_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  return dir;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

NodeSummary Chronic(const std::string& node) {
  NodeSummary n;
  n.node = node;
  n.cls = NodeClass::kChronic;
  n.gpu_seconds = 12.5;
  n.windows = 10;
  n.charged_windows = 6;
  n.jobs_charged = 2;
  n.jobs = {"job1", "job2"};
  n.stages = {{"data", 12.5, 6}};
  return n;
}

struct Logged {
  std::vector<std::string> lines;
  std::mutex mu;
  DrainHook::Log log() {
    return [this](const std::string& l) {
      std::lock_guard<std::mutex> lock(mu);
      lines.push_back(l);
    };
  }
  std::string all() {
    std::lock_guard<std::mutex> lock(mu);
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
};

TEST_CASE("dry run by default: says what it would run, runs nothing") {
  const std::string dir = TempDir();
  Logged logged;
  DrainHookOptions o;
  o.command = "touch " + dir + "/ran";
  DrainHook hook(o, logged.log());
  hook.Start();
  hook.OnClassChange(Chronic("node7"));
  hook.Drain();
  CHECK(hook.counters().dry_runs == 1);
  CHECK(logged.all().find("would run: touch") != std::string::npos);
  CHECK(logged.all().find("SF_NODE=node7") != std::string::npos);
  CHECK(ReadAll(dir + "/ran").empty());
  CHECK(access((dir + "/ran").c_str(), F_OK) != 0);
}

TEST_CASE("executed: the command sees the node and its evidence in its environment") {
  const std::string dir = TempDir();
  Logged logged;
  DrainHookOptions o;
  o.execute = true;
  o.command =
      "echo \"$SF_NODE|$SF_NODE_CLASS|$SF_WASTED_GPU_SECONDS|$SF_STAGES|$SF_JOBS|$SF_REASON\" > " +
      dir + "/out";
  DrainHook hook(o, logged.log());
  hook.Start();
  hook.OnClassChange(Chronic("gpu-node-7.rack2"));
  hook.Drain();
  CHECK(hook.counters().succeeded == 1);
  const std::string out = ReadAll(dir + "/out");
  CHECK(out.rfind("gpu-node-7.rack2|chronic|12.500|data|job1,job2|StageFrontier: chronic", 0) == 0);
}

// Regression (issue 28, attack 7): with --drain-execute, one token holder's impostor sidecar
// picked which healthy machine was drained.
TEST_CASE("a node whose identity is in conflict is never drained") {
  const std::string dir = TempDir();
  Logged logged;
  DrainHookOptions o;
  o.execute = true;
  o.command = "touch " + dir + "/\"$SF_NODE\"";
  DrainHook hook(o, logged.log());
  hook.SetVeto([](const std::string& node) {
    return node == "node1" ? std::string("two sidecars claimed it") : std::string();
  });
  hook.Start();
  hook.OnClassChange(Chronic("node1"));
  hook.OnClassChange(Chronic("node2"));
  hook.Drain();
  CHECK(hook.counters().identity_conflicts == 1);
  CHECK(hook.counters().succeeded == 1);
  CHECK(access((dir + "/node1").c_str(), F_OK) != 0);
  CHECK(access((dir + "/node2").c_str(), F_OK) == 0);
  CHECK_THAT(logged.all(), Catch::Contains("node node1 is chronic but not drained: its identity "
                                           "is in conflict (two sidecars claimed it)"));
}

TEST_CASE("no more than max_per_hour nodes an hour; the rest are counted and logged") {
  Logged logged;
  DrainHookOptions o;
  o.command = "true";
  o.max_per_hour = 2;
  DrainHook hook(o, logged.log());
  hook.Start();
  for (const char* n : {"a", "b", "c", "d"}) hook.OnClassChange(Chronic(n));
  hook.Drain();
  CHECK(hook.counters().dry_runs == 2);
  CHECK(hook.counters().rate_limited == 2);
  CHECK(logged.all().find("node c is chronic but not drained") != std::string::npos);
}

TEST_CASE("a failing command is retried, then counted as failed") {
  const std::string dir = TempDir();
  Logged logged;
  DrainHookOptions o;
  o.execute = true;
  o.attempts = 3;
  o.retry_delay = std::chrono::milliseconds(10);
  o.command = "echo x >> " + dir + "/tries; exit 3";
  DrainHook hook(o, logged.log());
  hook.Start();
  hook.OnClassChange(Chronic("n1"));
  hook.Drain();
  CHECK(hook.counters().failed == 1);
  CHECK(ReadAll(dir + "/tries") == "x\nx\nx\n");
  CHECK(logged.all().find("attempt 3 of 3 failed: exit status 3") != std::string::npos);
}

TEST_CASE("a command that fails once succeeds on its retry") {
  const std::string dir = TempDir();
  Logged logged;
  DrainHookOptions o;
  o.execute = true;
  o.retry_delay = std::chrono::milliseconds(10);
  o.command = "if [ -e " + dir + "/once ]; then exit 0; fi; touch " + dir + "/once; exit 1";
  DrainHook hook(o, logged.log());
  hook.Start();
  hook.OnClassChange(Chronic("n1"));
  hook.Drain();
  CHECK(hook.counters().succeeded == 1);
  CHECK(hook.counters().failed == 0);
}

TEST_CASE("a hung command is killed at the time limit, children included") {
  Logged logged;
  DrainHookOptions o;
  o.execute = true;
  o.attempts = 2;
  o.retry_delay = std::chrono::milliseconds(10);
  o.timeout = std::chrono::milliseconds(200);
  o.command = "sleep 30 & sleep 30";
  DrainHook hook(o, logged.log());
  hook.Start();
  hook.OnClassChange(Chronic("n1"));
  hook.Drain();
  CHECK(hook.counters().timeouts == 2);
  CHECK(hook.counters().failed == 1);
  CHECK(logged.all().find("timed out after 200 ms") != std::string::npos);
}

TEST_CASE("unsafe node names and non-chronic nodes are not handed to the command") {
  Logged logged;
  DrainHookOptions o;
  o.command = "true";
  DrainHook hook(o, logged.log());
  hook.Start();
  hook.OnClassChange(Chronic("n1; rm -rf /"));
  NodeSummary transient = Chronic("n2");
  transient.cls = NodeClass::kTransient;
  hook.OnClassChange(transient);
  hook.Drain();
  CHECK(hook.counters().refused_names == 1);
  CHECK(hook.counters().dry_runs == 0);
  CHECK(SafeNodeName("node-1.example_a"));
  CHECK_FALSE(SafeNodeName(""));
  CHECK_FALSE(SafeNodeName("a b"));
}

TEST_CASE("Stop during a retry delay returns promptly") {
  Logged logged;
  DrainHookOptions o;
  o.execute = true;
  o.retry_delay = std::chrono::seconds(60);
  o.command = "exit 1";
  auto hook = std::make_unique<DrainHook>(o, logged.log());
  hook->Start();
  hook->OnClassChange(Chronic("n1"));
  for (int i = 0; i < 500 && logged.all().find("attempt 1") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  hook->Stop();  // would take 60 s if the delay ignored it (the test's timeout catches that)
  CHECK(hook->counters().failed == 1);
}

}  // namespace
}  // namespace stagefrontier
