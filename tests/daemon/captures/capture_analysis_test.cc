#include "daemon/captures/capture_analysis.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/daemon/captures/trace_builder.h"

namespace stagefrontier {
namespace {

// Steps 1..3 of a stage "forward" holding one matmul of `mm_us`; without distributedInfo when
// `rank` < 0, as torch builds without Kineto write them.
std::string Trace(int rank, double mm_us) {
  testing::TraceBuilder b(rank < 0 ? 0 : rank);
  for (int step = 1; step <= 3; ++step) {
    const double base = step * 10'000.0;
    b.Add("ProfilerStep#" + std::to_string(step), base, 9000, 1, "user_annotation");
    b.Add("stagefrontier:forward", base, 1000 + mm_us, 1, "user_annotation");
    b.Add("aten::mm", base + 100, mm_us);
  }
  std::string json = b.Json();
  if (rank < 0) json = "{" + json.substr(json.find("\"traceEvents\""));
  return json;
}

TEST_CASE("files in, report out; the rank from the file name when the trace lacks it") {
  char tmpl[] = "/tmp/sf_capture_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  const std::string suspect = write("trace_rank7.json", Trace(-1, 3000));
  const std::string ref = write("trace_rank2.json", Trace(2, 500));
  const std::string anonymous = write("peer.json", Trace(-1, 500));
  const StageSchema schema = *StageSchema::Parse("forward:compute,sync:sync");
  absl::StatusOr<OperatorReport> r =
      AnalyzeCaptureFiles(suspect, {ref, anonymous}, schema, "forward");
  REQUIRE(r.ok());
  CHECK(r->suspect_rank == 7);
  CHECK(r->reference_ranks == std::vector<int32_t>{2, -1});
  REQUIRE(r->findings.size() == 1);
  CHECK(r->findings[0].path == "aten::mm");
  CHECK(r->findings[0].excess_ns == Approx(2.5e6));
  REQUIRE(r->notes.size() >= 2);
  // Notes name the file by its base name, not by the folders of the machine that read it.
  CHECK(r->notes[0] == "trace_rank7.json has no distributedInfo.rank: rank 7 from its name");
  CHECK(r->notes[1] == "peer.json has no distributedInfo.rank and no rank<N> in its name: rank -1");

  // A capture's own file name (trace_rank<R>_step<F>.json) says its rank by design: no note.
  const std::string captured = write("trace_rank5_step120.json", Trace(-1, 3000));
  absl::StatusOr<OperatorReport> c = AnalyzeCaptureFiles(captured, {ref}, schema, "forward");
  REQUIRE(c.ok());
  CHECK(c->suspect_rank == 5);
  for (const std::string& n : c->notes) CHECK_THAT(n, !Catch::Contains("distributedInfo"));

  CHECK(AnalyzeCaptureFiles(dir + "/none.json", {ref}, schema, "forward").status().code() ==
        absl::StatusCode::kNotFound);
  const std::string broken = write("trace_rank3.json", "{\"traceEvents\": [");
  CHECK_THAT(
      std::string(AnalyzeCaptureFiles(suspect, {broken}, schema, "forward").status().message()),
      Catch::Contains("trace_rank3.json: not valid JSON"));
}

}  // namespace
}  // namespace stagefrontier
