#include "daemon/captures/operator_profile.h"

#include <catch2/catch.hpp>

#include "tests/daemon/captures/trace_builder.h"

namespace stagefrontier {
namespace {

StageSchema Schema() { return *StageSchema::Parse("data:io,backward:compute,sync:sync"); }

absl::StatusOr<OperatorProfile> ProfileOf(const testing::TraceBuilder& b,
                                          const std::string& stage) {
  absl::StatusOr<ChromeTrace> t = ParseChromeTrace(b.Json(), "t.json");
  REQUIRE(t.ok());
  return ProfileOperators(*t, Schema(), stage, "t.json");
}

TEST_CASE("operators inside the stage, by call path, on every thread of the trainer") {
  testing::TraceBuilder b(1);
  for (int step = 1; step <= 2; ++step) {
    const double base = step * 10'000.0;
    b.Add("ProfilerStep#" + std::to_string(step), base, 9000, 1, "user_annotation");
    b.Add("stagefrontier:data", base, 1000, 1, "user_annotation");
    b.Add("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", base + 100, 800);
    b.Add("stagefrontier:backward", base + 1000, 4000, 1, "user_annotation");
    // Autograd's thread: a node holding two matmuls, then an accumulation.
    b.Add("autograd::engine::evaluate_function: MmBackward0", base + 1100, 2000, 2);
    b.Add("aten::mm", base + 1200, 700, 2);
    b.Add("aten::mm", base + 2000, 900, 2);
    b.Add("autograd::engine::evaluate_function: AccumulateGrad", base + 3200, 300, 2);
    b.Add("gemm", base + 1250, 600, 7, "kernel", 0);  // GPU track: not the trainer's process
    b.Add("stagefrontier:sync", base + 5000, 1000, 1, "user_annotation");
  }
  b.Add("aten::zeros", 50'000, 10);  // after every step: in no stage
  absl::StatusOr<OperatorProfile> p = ProfileOf(b, "backward");
  REQUIRE(p.ok());
  CHECK(p->rank == 1);
  CHECK(p->steps == std::vector<int64_t>{1, 2});
  CHECK(p->stage_duration_ns == std::vector<int64_t>{4'000'000, 4'000'000});
  REQUIRE(p->operators.size() == 3);
  const std::string node = "autograd::engine::evaluate_function: MmBackward0";
  const std::vector<OperatorStep>& mm = p->operators.at(node + " > aten::mm");
  REQUIRE(mm.size() == 2);
  CHECK(mm[0].occurrences == 2);
  CHECK(mm[0].duration_ns == 1'600'000);
  CHECK(mm[0].begin_ns == 200'000);  // from the stage's start
  CHECK(mm[0].end_ns == 1'900'000);
  CHECK(mm[0].predecessor.empty());  // the first under its parent
  const std::vector<OperatorStep>& acc =
      p->operators.at("autograd::engine::evaluate_function: AccumulateGrad");
  CHECK(acc[1].predecessor == node);
  CHECK(acc[1].begin_ns == 2'200'000);
  const absl::StatusOr<OperatorProfile> data = ProfileOf(b, "data");
  REQUIRE(data.ok());
  CHECK(data->operators.count("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__") == 1);
}

TEST_CASE("an operator absent from a step has zero occurrences there") {
  testing::TraceBuilder b(0);
  for (int step = 1; step <= 2; ++step) {
    const double base = step * 10'000.0;
    b.Add("ProfilerStep#" + std::to_string(step), base, 9000, 1, "user_annotation");
    b.Add("stagefrontier:backward", base + 1000, 4000, 1, "user_annotation");
    if (step == 2) b.Add("aten::extra", base + 1100, 100);
  }
  absl::StatusOr<OperatorProfile> p = ProfileOf(b, "backward");
  REQUIRE(p.ok());
  const std::vector<OperatorStep>& extra = p->operators.at("aten::extra");
  CHECK(extra[0].occurrences == 0);
  CHECK(extra[0].duration_ns == 0);
  CHECK(extra[1].occurrences == 1);
}

TEST_CASE("a stage the schema lacks, or that never lasted, is refused") {
  testing::TraceBuilder b(0);
  b.Add("ProfilerStep#1", 0, 9000, 1, "user_annotation");
  b.Add("stagefrontier:data", 0, 1000, 1, "user_annotation");
  CHECK_THAT(std::string(ProfileOf(b, "optimizer").status().message()),
             Catch::Contains("stage \"optimizer\" is not in the schema"));
  CHECK_THAT(std::string(ProfileOf(b, "backward").status().message()),
             Catch::Contains("stage \"backward\" never lasted in a captured step"));
  testing::TraceBuilder no_steps(0);
  no_steps.Add("stagefrontier:data", 0, 1000);
  CHECK_THAT(std::string(ProfileOf(no_steps, "data").status().message()),
             Catch::Contains("no \"ProfilerStep#N\" events"));
}

}  // namespace
}  // namespace stagefrontier
