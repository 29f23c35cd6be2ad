#include "daemon/captures/chrome_trace.h"

#include <catch2/catch.hpp>

#include "tests/daemon/captures/trace_builder.h"

namespace stagefrontier {
namespace {

TEST_CASE("complete events keep name, category, process, thread and ns times") {
  testing::TraceBuilder b(3);
  b.Add("aten::mm", 10.5, 2, 7, "cpu_op", 42).Add("kernel", 11, 1, 9, "kernel", 0);
  std::string text = b.Json();
  // Another phase, a nameless complete event and a named GPU stream are skipped or kept as
  // Kineto writes them.
  text.insert(text.rfind(']'),
              ",{\"ph\":\"i\",\"name\":\"marker\",\"ts\":1}"
              ",{\"ph\":\"X\",\"ts\":1,\"dur\":1}"
              ",{\"ph\":\"X\",\"name\":\"memcpy\",\"pid\":0,\"tid\":\"stream 7\","
              "\"ts\":3,\"dur\":1}");
  absl::StatusOr<ChromeTrace> t = ParseChromeTrace(text, "t.json");
  REQUIRE(t.ok());
  CHECK(t->rank == 3);
  CHECK(t->world_size == 4);
  CHECK(t->all_events == 5);
  REQUIRE(t->events.size() == 3);
  CHECK(t->events[0].name == "aten::mm");
  CHECK(t->events[0].category == "cpu_op");
  CHECK(t->events[0].process == "42");
  CHECK(t->events[0].thread == "7");
  CHECK(t->events[0].begin_ns == 10'500);
  CHECK(t->events[0].end_ns == 12'500);
  CHECK(t->events[2].thread == "stream 7");
  CHECK(t->events[2].category.empty());
}

TEST_CASE("malformed traces name the file and what is wrong") {
  auto message = [](const std::string& text) {
    return std::string(ParseChromeTrace(text, "x.json").status().message());
  };
  CHECK_THAT(message("{\"traceEvents\": [1, 2"), Catch::Contains("x.json: not valid JSON at byte"));
  CHECK_THAT(message("{\"other\": []}"), Catch::Contains("no \"traceEvents\" array"));
  CHECK_THAT(message("[3]"), Catch::Contains("event 0 is not an object"));
  CHECK_THAT(message("[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1}]"),
             Catch::Contains("event 0 (\"a\") has no numeric \"ts\" and \"dur\""));
  CHECK_THAT(message("[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":-1}]"),
             Catch::Contains("implausible ts"));
  CHECK_THAT(message("[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1e300,\"dur\":1}]"),
             Catch::Contains("implausible ts"));
  CHECK(ParseChromeTrace("[]", "x.json").ok());
}

// Regression (hostile input): an event's name reached sfctl's terminal, the reports and the
// coordinator's log as it was: an escape sequence or a newline forged output there.
TEST_CASE("control characters in a trace's names never leave the parser") {
  // JSON escapes: the parsed name holds ESC, BEL, a newline and U+009B (CSI).
  const std::string evil = "a\\u001b]52;c;x\\u0007\\n[info] fake\\u009b2J";
  auto trace = ParseChromeTrace("[{\"ph\":\"X\",\"name\":\"" + evil +
                                    "\",\"cat\":\"c\\u001b\",\"pid\":\"p\\n\",\"ts\":1,\"dur\":1}]",
                                "x.json");
  REQUIRE(trace.ok());
  REQUIRE(trace->events.size() == 1);
  CHECK(trace->events[0].name == "a?]52;c;x??[info] fake??2J");
  CHECK(trace->events[0].category == "c?");
  CHECK(trace->events[0].process == "p?");
  const std::string message =
      std::string(ParseChromeTrace("[{\"ph\":\"X\",\"name\":\"" + evil + "\",\"ts\":1}]", "x.json")
                      .status()
                      .message());
  CHECK(message.find('\x1b') == std::string::npos);
  CHECK(message.find('\n') == std::string::npos);
  CHECK_THAT(message, Catch::Contains("(\"a?]52;c;x??[info] fake??2J\")"));
}

TEST_CASE("a pid nested 200,000 arrays deep is refused, not recursed into (issue 28, attack 3)") {
  // The attack's trace: one complete event whose pid nests 200,000 arrays (400 KB). Turning it
  // into text recursed once per level and overflowed the coordinator's report thread.
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const std::string text =
      "{\"traceEvents\": [{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1,"
      "\"pid\":" +
      deep + ",\"tid\":1}]}";
  const absl::StatusOr<ChromeTrace> t = ParseChromeTrace(text, "evil.json");
  REQUIRE_FALSE(t.ok());
  CHECK(absl::IsResourceExhausted(t.status()));
  CHECK_THAT(std::string(t.status().message()),
             Catch::Contains("evil.json") && Catch::Contains("nested deeper than 64"));
  // As deep as the limit allows is still read; a shallow non-scalar pid stays text.
  const std::string ok =
      "{\"traceEvents\": [{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1,"
      "\"pid\":[[1]],\"tid\":1}]}";
  const absl::StatusOr<ChromeTrace> shallow = ParseChromeTrace(ok, "ok.json");
  REQUIRE(shallow.ok());
  CHECK(shallow->events.at(0).process == "[[1]]");
}

TEST_CASE("a trace over the byte or event limit is refused with the limit named") {
  testing::TraceBuilder b(0);
  for (int i = 0; i < 10; ++i) b.Add("op", i, 1, 1, "cpu_op", 1);
  const std::string text = b.Json();
  TraceParseLimits limits;
  limits.max_events = 5;
  absl::StatusOr<ChromeTrace> t = ParseChromeTrace(text, "many.json", limits);
  REQUIRE_FALSE(t.ok());
  CHECK(absl::IsResourceExhausted(t.status()));
  CHECK_THAT(std::string(t.status().message()), Catch::Contains("more than the 5"));
  limits = TraceParseLimits{};
  limits.max_bytes = text.size() - 1;
  t = ParseChromeTrace(text, "big.json", limits);
  REQUIRE_FALSE(t.ok());
  CHECK_THAT(std::string(t.status().message()), Catch::Contains("bytes, more than the"));
  CHECK(ParseChromeTrace(text, "fine.json").ok());
}

}  // namespace
}  // namespace stagefrontier
