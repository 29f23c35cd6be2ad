#include "daemon/captures/capture_reports.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "daemon/captures/capture_compression.h"
#include "daemon/captures/capture_file_name.h"
#include "shm/control_channel.h"
#include "tests/daemon/captures/capture_chunk_builder.h"
#include "tests/daemon/captures/trace_builder.h"

namespace stagefrontier {
namespace {

std::string Trace(int rank, double mm_us) { return testing::ForwardStageTrace(rank, mm_us); }

// Rank `rank`'s capture from step 20, sent whole in one chunk.
void Store(CaptureStore* store, const std::string& job, int rank, const std::string& text) {
  REQUIRE(store->Accept(testing::MakeChunk(CaptureFileNameFor(rank, 20), text, 0, text.size(), job))
              .ok());
}

CaptureDecision Decision(uint64_t id, std::string stage) {
  CaptureDecision d;
  d.id = id;
  d.asked = true;
  d.suspects = {1};
  d.references = {0, 2};
  d.first_step = 20;
  d.steps = 5;
  d.stage = std::move(stage);
  d.reason = "CLEAR (forward, 1) on rank 1";
  return d;
}

struct Fixture {
  Fixture() : store({.root = Root()}) { REQUIRE(store.Open().ok()); }
  static std::string Root() {
    char tmpl[] = "/tmp/sf_capture_reports_XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    return tmpl;
  }
  CaptureReports Reports() {
    return CaptureReports(
        &store, [this](const std::string&) { return decisions; },
        [this](const std::string&) { return schema; },
        [this](const std::string& line) { log.push_back(line); });
  }
  CaptureStore store;
  std::vector<CaptureDecision> decisions;
  std::optional<StageSchema> schema = *StageSchema::Parse("forward:compute,sync:sync");
  std::vector<std::string> log;
};

TEST_CASE("capture reports: waiting for the files, then the suspect's operator named") {
  Fixture f;
  f.decisions = {Decision(1, "forward")};
  CaptureReports reports = f.Reports();
  Store(&f.store, "job1", 1, Trace(1, 3000));
  Store(&f.store, "job1", 0, Trace(0, 500));
  CHECK(reports.AnalyseJob("job1") == 0);
  absl::StatusOr<CaptureReportView> v = reports.Get("job1", 1);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kWaiting);
  CHECK(v->detail == "waiting for the files of rank 2");
  CHECK(v->files.size() == 2);

  Store(&f.store, "job1", 2, Trace(2, 520));
  CHECK(reports.AnalyseJob("job1") == 1);
  CHECK(reports.AnalyseJob("job1") == 0);  // written once
  v = reports.Get("job1", 1);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kAnalysed);
  CHECK(v->files.size() == 3);
  CHECK_THAT(v->text, Catch::Contains("culprit"));
  CHECK_THAT(v->text, Catch::Contains("aten::mm"));
  const nlohmann::json j = nlohmann::json::parse(v->json);
  CHECK(j["stage"] == "forward");
  CHECK(j["reports"][0]["suspect_rank"] == 1);
  CHECK(j["reports"][0]["findings"][0]["path"] == "aten::mm");
  CHECK(reports.counters().analysed == 1);
  CHECK_THAT(f.log.back(), Catch::Contains("sfctl capture-report --job job1 --capture 1"));

  // A restarted coordinator (the policy forgot the capture) still serves the written report.
  f.decisions.clear();
  CaptureReports after = f.Reports();
  v = after.Get("job1", 1);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kAnalysed);
  CHECK(v->files.size() == 3);
  CHECK(after.Get("job1", 7).status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("capture reports: a rank whose profiler failed is not waited for") {
  Fixture f;
  f.decisions = {Decision(2, "forward")};
  std::vector<RankCaptureAnswer> answers;
  CaptureReports reports = f.Reports();
  reports.SetAnswersOf([&](const std::string&, const CaptureDecision&) { return answers; });
  Store(&f.store, "job1", 1, Trace(1, 3000));
  Store(&f.store, "job1", 0, Trace(0, 500));
  // Rank 2 still capturing: waited for.
  answers = {{1, shm::v1::kCaptureDone, 0, 10, ""},
             {0, shm::v1::kCaptureDone, 0, 10, ""},
             {2, shm::v1::kCaptureRunning, 0, 0, ""}};
  CHECK(reports.AnalyseJob("job1") == 0);
  // Rank 2's profiler was busy: analysed with rank 0 alone, and the report says so.
  answers[2] = {2, shm::v1::kCaptureFailed, shm::v1::kCaptureProfilerBusy, 0, ""};
  CHECK(reports.AnalyseJob("job1") == 1);
  absl::StatusOr<CaptureReportView> v = reports.Get("job1", 2);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kAnalysed);
  CHECK_THAT(v->text, Catch::Contains("aten::mm"));
  CHECK_THAT(v->text, Catch::Contains("left out: rank 2: its profiler failed (busy), no trace"));
  const nlohmann::json j = nlohmann::json::parse(v->json);
  CHECK(j["left_out"].size() == 1);

  // The suspect's profiler failed: nothing to analyse, and the report says why.
  f.decisions.push_back(Decision(3, "forward"));
  f.decisions.back().first_step = 40;
  answers = {{1, shm::v1::kCaptureFailed, shm::v1::kCaptureWriteFailed, 0, ""},
             {0, shm::v1::kCaptureFailed, shm::v1::kCaptureMissed, 0, ""},
             {2, shm::v1::kCaptureFailed, shm::v1::kCaptureMissed, 0, ""}};
  CHECK(reports.AnalyseJob("job1") == 1);
  v = reports.Get("job1", 3);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kFailed);
  CHECK_THAT(v->detail, Catch::Contains("rank 1: its profiler failed (write), no trace"));
  CHECK_THAT(v->detail, Catch::Contains("no reference rank's trace to compare with"));
}

TEST_CASE("capture reports: a remembered capture is analysed after a restart, ids go on") {
  Fixture f;
  CHECK(CaptureReports::HighestIdIn(f.store.options().root) == 0);
  f.decisions = {Decision(5, "forward")};
  {
    CaptureReports reports = f.Reports();
    reports.Remember("job1", f.decisions[0]);
    Store(&f.store, "job1", 1, Trace(1, 3000));
    CHECK(reports.AnalyseJob("job1") == 0);  // waiting for ranks 0 and 2
  }
  // The coordinator restarts: its policy remembers nothing, the files still come.
  f.decisions.clear();
  CaptureReports reports = f.Reports();
  const std::vector<CaptureDecision> kept = reports.Remembered("job1");
  REQUIRE(kept.size() == 1);
  CHECK(kept[0].id == 5);
  CHECK(kept[0].suspects == std::vector<int32_t>{1});
  CHECK(kept[0].references == std::vector<int32_t>{0, 2});
  CHECK(kept[0].stage == "forward");
  CHECK(kept[0].first_step == 20);
  absl::StatusOr<CaptureReportView> v = reports.Get("job1", 5);
  REQUIRE(v.ok());
  CHECK(v->detail == "waiting for the files of ranks 0, 2");
  Store(&f.store, "job1", 0, Trace(0, 500));
  Store(&f.store, "job1", 2, Trace(2, 510));
  CHECK(reports.AnalyseJob("job1") == 1);
  v = reports.Get("job1", 5);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kAnalysed);
  // The next run's ids start past every id on disk.
  CHECK(CaptureReports::HighestIdIn(f.store.options().root) == 5);
  // A damaged decision file is skipped, not fatal.
  std::ofstream(f.store.options().root + "/job1/capture9.decision.json") << "{\"capture\": ";
  CHECK(reports.Remembered("job1").size() == 1);
  CHECK(CaptureReports::HighestIdIn(f.store.options().root) == 9);
}

TEST_CASE("capture reports: a broken trace fails the report with its reason") {
  Fixture f;
  f.decisions = {Decision(4, "forward")};
  CaptureReports reports = f.Reports();
  Store(&f.store, "job1", 1, Trace(1, 3000));
  Store(&f.store, "job1", 0, "{\"traceEvents\": [");
  Store(&f.store, "job1", 2, Trace(2, 500));
  CHECK(reports.AnalyseJob("job1") == 1);
  absl::StatusOr<CaptureReportView> v = reports.Get("job1", 4);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kFailed);
  CHECK_THAT(v->detail, Catch::Contains("not valid JSON"));
  CHECK(reports.counters().failed == 1);
}

TEST_CASE("capture reports: no stage or no reference, not analysed, and why") {
  Fixture f;
  CaptureDecision by_hand = Decision(2, "");
  by_hand.manual = true;
  f.decisions = {by_hand};
  CaptureReports reports = f.Reports();
  absl::StatusOr<CaptureReportView> v = reports.Get("job1", 2);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kNotAnalysed);
  CHECK_THAT(v->detail, Catch::Contains("stagefrontier compare-ops"));
}

TEST_CASE("capture reports: a missed capture is not analysed, and says why, not waiting") {
  Fixture f;
  CaptureDecision missed = Decision(3, "forward");
  missed.missed = "the job ended at step 18 before the capture's first step 20";
  f.decisions = {missed};
  CaptureReports reports = f.Reports();
  absl::StatusOr<CaptureReportView> v = reports.Get("job1", 3);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kNotAnalysed);
  CHECK(v->detail == "missed: the job ended at step 18 before the capture's first step 20");
}

TEST_CASE("capture reports: the worker thread analyses as files arrive") {
  Fixture f;
  f.decisions = {Decision(3, "forward")};
  CaptureReports reports = f.Reports();
  f.store.SetOnComplete([&](const StoredCapture& file) { reports.OnFileStored(file); });
  reports.Start();
  for (int r = 0; r < 3; ++r) Store(&f.store, "job1", r, Trace(r, r == 1 ? 3000 : 500));
  for (int i = 0; i < 2000 && reports.counters().analysed == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  reports.Stop();
  CHECK(reports.counters().analysed == 1);
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

CaptureDecision Stacks(uint64_t id, int64_t decided_unix_ns) {
  CaptureDecision d;
  d.kind = CaptureKind::kStacks;
  d.id = id;
  d.asked = true;
  d.suspects = {0};
  d.references = {1};
  d.first_step = 150;
  d.stage = "forward";
  d.reason = "stacks at the stall (hung): rank 0 hung in forward at step 150";
  d.notes = {{0, "stuck in forward at step 150 for 12 s"},
             {1, "waiting in grad_sync at step 150 for 12 s"}};
  d.decided_unix_ns = decided_unix_ns;
  return d;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void StoreFile(CaptureStore* store, const std::string& name, const std::string& text) {
  REQUIRE(store->Accept(testing::MakeChunk(name, text, 0, text.size(), "job1")).ok());
}

TEST_CASE("stack captures: the stuck rank's stacks beside the waiting rank's, once both came") {
  Fixture f;
  f.decisions = {Stacks(4, NowNs())};
  CaptureReports reports = f.Reports();
  reports.Remember("job1", f.decisions[0]);
  StoreFile(&f.store, StacksFileNameFor(0, 4),
            "# stagefrontier stack dump\nThread 0x1 (most recent call first):\n"
            "  File \"train.py\", line 12 in stuck_in_forward\n\x01\xff");
  CHECK(reports.AnalyseJob("job1") == 0);  // rank 1's stacks are not here yet
  absl::StatusOr<CaptureReportView> v = reports.Get("job1", 4);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kWaiting);
  CHECK_THAT(v->detail, Catch::Contains("waiting for the stacks of rank 1"));

  StoreFile(&f.store, StacksFileNameFor(1, 4),
            "Thread 0x2 (most recent call first):\n  File \"dist.py\", line 3 in all_reduce\n");
  StoreFile(&f.store, FlightRecorderFileNameFor(0, 4), "{\"entries\": []}");
  CHECK(reports.AnalyseJob("job1") == 1);
  v = reports.Get("job1", 4);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kAnalysed);
  CHECK_THAT(v->text,
             Catch::Contains("== rank 0 (stuck in forward at step 150 for 12 s) ==") &&
                 Catch::Contains("in stuck_in_forward") &&
                 Catch::Contains("== rank 1 (waiting in grad_sync at step 150 for 12 s) ==") &&
                 Catch::Contains("in all_reduce") &&
                 Catch::Contains("NCCL flight recorder dump: flightrec_rank0_capture4.json"));
  CHECK_THAT(v->text, !Catch::Contains("\x01"));  // a trainer's bytes shown printable
  CHECK(v->files.size() == 3);                    // both stacks and the dump, for fetching

  // A restarted coordinator (nothing in memory) still has the decision and its report.
  f.decisions.clear();
  CaptureReports again = f.Reports();
  CHECK(again.Expects("job1", *ParseCaptureFileName(StacksFileNameFor(1, 4))));
  CHECK_FALSE(again.Expects("job1", *ParseCaptureFileName(StacksFileNameFor(2, 4))));
  CHECK_FALSE(again.Expects("job1", *ParseCaptureFileName(CaptureFileNameFor(0, 150))));
  v = again.Get("job1", 4);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kAnalysed);
}

// Hostile input: a trainer's stacks file is shown bounded (64 KiB a rank), whatever its size.
TEST_CASE("stack captures: a huge stacks file is cut in the report, and says so") {
  Fixture f;
  f.decisions = {Stacks(7, NowNs())};
  CaptureReports reports = f.Reports();
  StoreFile(&f.store, StacksFileNameFor(0, 7), std::string(1 << 20, 'x'));
  StoreFile(&f.store, StacksFileNameFor(1, 7), "Thread 0x2:\n  File \"t.py\" in wait\n");
  CHECK(reports.AnalyseJob("job1") == 1);
  absl::StatusOr<CaptureReportView> v = reports.Get("job1", 7);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kAnalysed);
  CHECK_THAT(v->text, Catch::Contains("... (cut at 65536 bytes: sfctl capture-fetch)"));
  CHECK(v->text.size() < (80U << 10));  // 64 KiB of rank 0, rank 1's lines, the headers
  CHECK_THAT(v->text, Catch::Contains("in wait"));
}

TEST_CASE("stack captures: a rank refused by its sidecar, or silent for 30 s, is reported so") {
  Fixture f;
  f.decisions = {Stacks(5, NowNs())};
  CaptureReports reports = f.Reports();
  reports.SetAnswersOf([](const std::string&, const CaptureDecision&) {
    RankCaptureAnswer refused;
    refused.rank = 1;
    refused.state = shm::v1::kCaptureFailed;
    refused.error = "not signalled: the trainer has no stack dump handler";
    return std::vector<RankCaptureAnswer>{refused};
  });
  StoreFile(&f.store, StacksFileNameFor(0, 5), "Thread 0x1:\n  File \"t.py\" in hang\n");
  CHECK(reports.AnalyseJob("job1") == 1);  // no need to wait for a refused rank
  absl::StatusOr<CaptureReportView> v = reports.Get("job1", 5);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kAnalysed);
  CHECK_THAT(v->text, Catch::Contains("rank 1: no stacks: not signalled: the trainer has no "
                                      "stack dump handler"));

  // Nobody answered and nothing came: reported failed once the wait ran out.
  f.decisions = {Stacks(6, NowNs() - kStacksWaitNs - 1)};
  CaptureReports late = f.Reports();
  CHECK(late.AnalyseJob("job1") == 1);
  v = late.Get("job1", 6);
  REQUIRE(v.ok());
  CHECK(v->state == CaptureReportView::State::kFailed);
  CHECK_THAT(v->detail, Catch::Contains("rank 0: no stacks: no file within 30 s of the request"));
}

}  // namespace
}  // namespace stagefrontier
