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

}  // namespace
}  // namespace stagefrontier
