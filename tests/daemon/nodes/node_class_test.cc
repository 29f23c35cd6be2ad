#include "daemon/nodes/node_class.h"

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

NodeClass Feed(NodeClassTracker* t, const char* pattern, const NodeClassConfig& c = {}) {
  for (const char* p = pattern; *p != 0; ++p) t->Observe(*p == 'x', c);
  return t->cls();
}

TEST_CASE("a node never charged is healthy") {
  NodeClassTracker t;
  CHECK(Feed(&t, "..........") == NodeClass::kHealthy);
  CHECK(t.windows() == 10);
  CHECK(t.charged_windows() == 0);
  CHECK(t.windows_since_charge() == -1);
}

TEST_CASE("four charged windows in a row make a node chronic; three do not") {
  NodeClassTracker three;
  CHECK(Feed(&three, "....xxx") == NodeClass::kTransient);
  NodeClassTracker four;
  CHECK(Feed(&four, "....xxxx") == NodeClass::kChronic);
  CHECK(four.episodes() == 1);
}

TEST_CASE("isolated charges leave a node transient, then healthy once forgotten") {
  NodeClassConfig c;
  c.transient_memory_windows = 5;
  NodeClassTracker t;
  CHECK(Feed(&t, "x...x...x...x", c) == NodeClass::kTransient);
  CHECK(t.episodes() == 4);
  CHECK(Feed(&t, ".....", c) == NodeClass::kHealthy);
}

TEST_CASE("one window in two charged, sustained, is chronic") {
  NodeClassTracker t;
  CHECK(Feed(&t, "x.x.x.x.x.x.x.x.x.x.") == NodeClass::kChronic);
}

TEST_CASE("chronic holds through a clean window and ends once the EWMA decays") {
  NodeClassTracker t;
  REQUIRE(Feed(&t, "xxxxxx") == NodeClass::kChronic);
  CHECK(Feed(&t, ".") == NodeClass::kChronic);  // hysteresis
  CHECK(Feed(&t, "..........") == NodeClass::kTransient);
  CHECK(t.ewma() < 0.2);
}

TEST_CASE("Observe says when the class changed") {
  NodeClassTracker t;
  CHECK(t.Observe(true, {}));  // healthy -> transient
  CHECK_FALSE(t.Observe(true, {}));
}

TEST_CASE("invalid class configs are refused with the field named") {
  NodeClassConfig c;
  c.lambda = 0;
  CHECK(c.Validate().message().find("lambda") != std::string::npos);
  c = {};
  c.chronic_exit = 0.6;
  CHECK(c.Validate().message().find("exit") != std::string::npos);
  c = {};
  c.charge_share = 0;
  CHECK(c.Validate().message().find("share") != std::string::npos);
  c = {};
  c.min_charged_windows = 0;
  CHECK_FALSE(c.Validate().ok());
  CHECK(NodeClassConfig{}.Validate().ok());
}

}  // namespace
}  // namespace stagefrontier
