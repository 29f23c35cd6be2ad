// Reducing the traces of several ranks, one file each, to a recorded run: the steps every
// trace holds, the packed size for comparison, and rank errors.
#include "daemon/analyze/trace_run.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tests/daemon/captures/stage_trace_fixture.h"

namespace stagefrontier {
namespace {

using testing::Event;
using testing::Schema;
using testing::Trace;

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
