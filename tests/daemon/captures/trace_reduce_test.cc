// Reducing Chrome traces to stages: steps from ProfilerStep#N, stage ends from the
// "stagefrontier:<stage>" ranges, rank from distributedInfo, and clear errors.
#include "daemon/captures/trace_reduce.h"

#include <catch2/catch.hpp>
#include <string>

#include "tests/daemon/captures/stage_trace_fixture.h"

namespace stagefrontier {
namespace {

using testing::Event;
using testing::Schema;
using testing::Trace;

TEST_CASE("a trace reduces to per-step boundaries on the stub's stages") {
  absl::StatusOr<RankTrace> t = ReduceChromeTrace(Trace(1), Schema(), "t.json");
  REQUIRE(t.ok());
  CHECK(t->rank == 1);
  CHECK(t->world_size == 2);
  CHECK(t->events == 10);
  CHECK(t->unknown_stage_ranges == 1);
  CHECK(t->ranges_outside_steps == 1);
  REQUIRE(t->steps.size() == 2);
  CHECK(t->steps.at(7) == std::vector<int64_t>{1'000'000, 3'000'000, 8'000'000, 9'000'000});
  // No forward range in step 8: forward ends where data ended.
  CHECK(t->steps.at(8) == std::vector<int64_t>{11'000'000, 13'000'000, 13'000'000, 19'000'000});
  // A bare array of events is a Chrome trace too.
  const std::string bare =
      "[" + Event("ProfilerStep#1", 0, 10) + "," + Event("stagefrontier:sync", 1, 2) + "]";
  absl::StatusOr<RankTrace> b = ReduceChromeTrace(bare, Schema(), "b.json");
  REQUIRE(b.ok());
  CHECK(b->rank == -1);
  CHECK(b->steps.at(1) == std::vector<int64_t>{0, 0, 0, 3000});
}

TEST_CASE("malformed traces are refused with what is wrong") {
  auto message = [](const std::string& text) {
    return std::string(ReduceChromeTrace(text, Schema(), "x.json").status().message());
  };
  CHECK_THAT(message("{\"traceEvents\": [1, 2"), Catch::Contains("x.json: not valid JSON at byte"));
  CHECK_THAT(message("{\"other\": []}"), Catch::Contains("no \"traceEvents\" array"));
  CHECK_THAT(message("{\"traceEvents\": [3]}"), Catch::Contains("event 0 is not an object"));
  CHECK_THAT(message("[" + Event("stagefrontier:data", 0, 1) + "]"),
             Catch::Contains("no \"ProfilerStep#N\" events"));
  CHECK_THAT(message("[" + Event("ProfilerStep#1", 0, 1) + "]"),
             Catch::Contains("no \"stagefrontier:<stage>\" ranges"));
  CHECK_THAT(message("[" + Event("ProfilerStep#-1", 0, 1) + "]"),
             Catch::Contains("does not end in a step number"));
  CHECK_THAT(message("[" + Event("ProfilerStep#1", 0, -5) + "]"),
             Catch::Contains("implausible ts"));
  CHECK_THAT(message("[{\"ph\":\"X\",\"name\":\"ProfilerStep#1\",\"ts\":1}]"),
             Catch::Contains("has no numeric \"ts\" and \"dur\""));
}

}  // namespace
}  // namespace stagefrontier
