#include "daemon/captures/capture_analysis_child.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "daemon/captures/capture_compression.h"
#include "daemon/captures/capture_file_name.h"
#include "daemon/captures/capture_reports.h"
#include "tests/daemon/captures/capture_chunk_builder.h"
#include "tests/daemon/captures/trace_builder.h"

namespace stagefrontier {
namespace {

constexpr const char* kHelper = "tests/daemon/captures/capture_analysis_child_helper";

std::string TempDir() {
  char dir[] = "/tmp/sf_analysis_child_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  return dir;
}

std::string WriteFile(const std::string& dir, const std::string& name, const std::string& text,
                      mode_t mode = 0644) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  REQUIRE(::chmod(path.c_str(), mode) == 0);
  return path;
}

std::string Trace(int rank, double mm_us) { return testing::ForwardStageTrace(rank, mm_us); }

// The attack's trace: a pid nested 200,000 arrays deep.
std::string DeepTrace() {
  return "{\"traceEvents\": [{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1,\"pid\":" +
         std::string(200000, '[') + std::string(200000, ']') + ",\"tid\":1}]}";
}

const StageSchema kSchema = *StageSchema::Parse("forward:compute,sync:sync");

TEST_CASE("analysis child: answers what the analysis in process answers") {
  const std::string dir = TempDir();
  const std::string suspect = WriteFile(dir, "trace_rank1_step20.json", Trace(1, 3000));
  const std::string reference = WriteFile(dir, "trace_rank0_step20.json", Trace(0, 500));
  absl::StatusOr<CaptureAnalysis> in_process =
      AnalyseCaptureInProcess(suspect, {reference}, kSchema, "forward");
  REQUIRE(in_process.ok());
  absl::StatusOr<CaptureAnalysis> child =
      ChildCaptureAnalyser({.executable = kHelper})(suspect, {reference}, kSchema, "forward");
  REQUIRE(child.ok());
  CHECK(nlohmann::json::parse(child->report_json) ==
        nlohmann::json::parse(in_process->report_json));
  CHECK(child->text == in_process->text);
  CHECK_THAT(child->text, Catch::Contains("aten::mm"));
}

TEST_CASE("analysis child: a trace's error comes back with its code and words") {
  const std::string dir = TempDir();
  const std::string deep = WriteFile(dir, "trace_rank1_step20.json", DeepTrace());
  const std::string reference = WriteFile(dir, "trace_rank0_step20.json", Trace(0, 500));
  absl::StatusOr<CaptureAnalysis> a =
      ChildCaptureAnalyser({.executable = kHelper})(deep, {reference}, kSchema, "forward");
  REQUIRE_FALSE(a.ok());
  CHECK(absl::IsResourceExhausted(a.status()));
  CHECK_THAT(std::string(a.status().message()), Catch::Contains("nested deeper than 64"));
  a = ChildCaptureAnalyser({.executable = kHelper})(dir + "/missing.json", {reference}, kSchema,
                                                    "forward");
  CHECK(absl::IsNotFound(a.status()));
}

TEST_CASE("analysis child: a crash, a hang, garbage or no binary fail with what happened") {
  const std::string dir = TempDir();
  const std::string trace = WriteFile(dir, "t.json", Trace(0, 500));
  auto run = [&](const std::string& script,
                 std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const std::string exe = WriteFile(dir, "child.sh", "#!/bin/sh\n" + script + "\n", 0755);
    CaptureAnalysisChildOptions o;
    o.executable = exe;
    o.timeout = timeout;
    return ChildCaptureAnalyser(o)(trace, {trace}, kSchema, "forward");
  };
  absl::StatusOr<CaptureAnalysis> a = run("kill -SEGV $$");
  CHECK(absl::IsInternal(a.status()));
  CHECK_THAT(std::string(a.status().message()), Catch::Contains("the analysis crashed (signal 11"));
  a = run("exec sleep 30", std::chrono::milliseconds(300));
  CHECK(absl::IsResourceExhausted(a.status()));
  CHECK_THAT(std::string(a.status().message()), Catch::Contains("ran past its"));
  a = run("echo nonsense");
  CHECK(absl::IsInternal(a.status()));
  CHECK_THAT(std::string(a.status().message()), Catch::Contains("without an answer"));
  a = ChildCaptureAnalyser({.executable = dir + "/absent"})(trace, {trace}, kSchema, "forward");
  CHECK(absl::IsUnavailable(a.status()));
}

// Rank `rank`'s capture from step 20, sent whole in one chunk.
void Store(CaptureStore* store, const std::string& job, int rank, const std::string& text) {
  REQUIRE(store->Accept(testing::MakeChunk(CaptureFileNameFor(rank, 20), text, 0, text.size(), job))
              .ok());
}

TEST_CASE(
    "capture reports: a trace that breaks the analysis fails its report, not the caller "
    "(issue 28, attack 3)") {
  CaptureStore store({.root = TempDir()});
  REQUIRE(store.Open().ok());
  CaptureDecision d;
  d.id = 1;
  d.asked = true;
  d.suspects = {1};
  d.references = {0};
  d.first_step = 20;
  d.steps = 5;
  d.stage = "forward";
  CaptureReports reports(
      &store, [&](const std::string&) { return std::vector<CaptureDecision>{d}; },
      [](const std::string&) { return std::optional<StageSchema>(kSchema); });
  // The analysis itself crashes (as the recursive dump did): only this report fails.
  const std::string crash = WriteFile(TempDir(), "crash.sh", "#!/bin/sh\nkill -SEGV $$\n", 0755);
  reports.SetAnalyser(ChildCaptureAnalyser({.executable = crash}));
  Store(&store, "job1", 1, DeepTrace());
  Store(&store, "job1", 0, Trace(0, 500));
  CHECK(reports.AnalyseJob("job1") == 1);
  absl::StatusOr<CaptureReportView> v = reports.Get("job1", 1);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kFailed);
  CHECK_THAT(v->detail, Catch::Contains("rank 1: the analysis crashed (signal 11"));
  CHECK(reports.counters().failed == 1);
  // The real child refuses the trace by its depth.
  CaptureStore store2({.root = TempDir()});
  REQUIRE(store2.Open().ok());
  CaptureReports reports2(
      &store2, [&](const std::string&) { return std::vector<CaptureDecision>{d}; },
      [](const std::string&) { return std::optional<StageSchema>(kSchema); });
  reports2.SetAnalyser(ChildCaptureAnalyser({.executable = kHelper}));
  Store(&store2, "job1", 1, DeepTrace());
  Store(&store2, "job1", 0, Trace(0, 500));
  CHECK(reports2.AnalyseJob("job1") == 1);
  v = reports2.Get("job1", 1);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kFailed);
  CHECK_THAT(v->detail, Catch::Contains("nested deeper than 64"));
}

}  // namespace
}  // namespace stagefrontier
