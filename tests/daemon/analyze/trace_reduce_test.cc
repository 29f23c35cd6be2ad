// Reducing Chrome traces to stages: steps from ProfilerStep#N, stage ends from the
// "stagefrontier:<stage>" ranges, rank from distributedInfo, and clear errors.
#include "daemon/analyze/trace_reduce.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

namespace stagefrontier {
namespace {

StageSchema Schema() { return *StageSchema::Parse("data:io,forward:compute,sync:sync"); }

std::string Event(const std::string& name, double ts_us, double dur_us) {
  return "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"" + name +
         "\",\"pid\":1,\"tid\":1,\"ts\":" + std::to_string(ts_us) +
         ",\"dur\":" + std::to_string(dur_us) + "}";
}

// Two steps of 10 ms starting at 1000 us; data 2 ms, forward 5 ms (step 8 has no forward
// range), sync until 9 ms; an unknown stage and a range outside every step.
std::string Trace(int rank, double data_extra_us = 0) {
  std::string events =
      Event("ProfilerStep#7", 1000, 10000) + "," + Event("ProfilerStep#8", 11000, 10000) + "," +
      Event("stagefrontier:data", 1000, 2000 + data_extra_us) + "," +
      Event("stagefrontier:forward", 3000 + data_extra_us, 5000) + "," +
      Event("stagefrontier:sync", 8000 + data_extra_us, 1000) + "," +
      Event("stagefrontier:data", 11000, 2000) + "," + Event("stagefrontier:sync", 13000, 6000) +
      "," + Event("stagefrontier:eval", 12000, 10) + "," + Event("stagefrontier:data", 50000, 10) +
      "," + "{\"ph\":\"i\",\"name\":\"instant\",\"ts\":5}";
  return "{\"schemaVersion\":1,\"distributedInfo\":{\"backend\":\"gloo\",\"rank\":" +
         std::to_string(rank) + ",\"world_size\":2},\"traceEvents\":[" + events + "]}";
}

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

TEST_CASE("files of several ranks: common steps, packed bytes, and rank errors") {
  char tmpl[] = "/tmp/sf_trace_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  const std::string a = write("a.json", Trace(0));
  const std::string b = write("b.json", Trace(1, 3000));  // rank 1's data 3 ms slower in step 7
  absl::StatusOr<TraceReduction> r = ReduceTraceFiles({a, b}, Schema());
  REQUIRE(r.ok());
  CHECK(r->run.world_size == 2);
  CHECK(r->run.steps.size() == 2);
  CHECK(r->rank_steps == 4);
  CHECK(r->packed_bytes > 0);
  CHECK(r->trace_bytes > 10 * r->packed_bytes);
  CHECK(r->run.steps.at(7).ranks[1].boundaries_ns[1] == 6'000'000);
  // Notes say what was left out.
  REQUIRE_FALSE(r->notes.empty());
  CHECK_THAT(r->notes[0], Catch::Contains("stage ranges name stages outside the schema"));

  CHECK_THAT(std::string(ReduceTraceFiles({a, a}, Schema()).status().message()),
             Catch::Contains("a second trace of rank 0"));
  CHECK(absl::IsNotFound(ReduceTraceFiles({dir + "/missing.json"}, Schema()).status()));
  const std::string far = write("far.json", Trace(5));
  CHECK_THAT(std::string(ReduceTraceFiles({a, far}, Schema()).status().message()),
             Catch::Contains("rank 5 is outside world size 2"));
}

}  // namespace
}  // namespace stagefrontier
