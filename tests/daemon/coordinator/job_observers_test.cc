// A job's one observer list (JobOptions::observers): every closed "job" window is told to each
// observer in list order, then each hears that verdicts were appended; a restored job's
// replayed windows are not told again, but their verdicts are still announced.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/coordinator/job_state.h"
#include "daemon/events/verdict_observer.h"
#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"

namespace stagefrontier {
namespace {

constexpr int kWorld = 4;

// Appends "<name>:window" and "<name>:appended" to a log shared by every observer.
class Logger : public VerdictObserver {
 public:
  Logger(std::string name, std::vector<std::string>* log) : name_(std::move(name)), log_(log) {}
  void OnJobWindow(const ClosedJobWindow& w) override {
    log_->push_back(name_ + ":window");
    windows.push_back(w);
    windows.back().verdict = nullptr;  // valid during the call only
    windows.back().schema = nullptr;
    CHECK(w.verdict != nullptr);
    CHECK(w.schema != nullptr);
  }
  void OnVerdictsAppended() override { log_->push_back(name_ + ":appended"); }
  std::vector<ClosedJobWindow> windows;

 private:
  std::string name_;
  std::vector<std::string>* log_;
};

v1::RankDeclaration Decl() {
  v1::RankDeclaration d;
  d.set_job("obs");
  d.set_world_size(kWorld);
  for (const char* n : {"data", "sync"}) {
    v1::Stage* s = d.add_stages();
    s->set_name(n);
    s->set_kind(std::string(n) == "data" ? v1::STAGE_KIND_IO : v1::STAGE_KIND_SYNC);
  }
  return d;
}

// Steps [0, steps) of every rank, each from node "node-<rank / 2>".
void IngestAll(JobState& job, int steps, int64_t now) {
  for (int r = 0; r < kWorld; ++r) {
    wire::PackedStepsEncoder enc(2);
    for (int s = 0; s < steps; ++s) {
      const int64_t d[2] = {1'000'000 + (r == 3 ? 500'000 : 0), 2'000'000};
      enc.Add(s, d, 0);
    }
    REQUIRE(
        job.Ingest(wire::MakeRankSteps("obs", r, enc), "node-" + std::to_string(r / 2), now).ok());
  }
}

TEST_CASE("every observer is told of each closed window, in list order, replays excepted") {
  char dir[] = "/tmp/sf_observers_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::vector<std::string> log;
  Logger first("first", &log), second("second", &log);
  JobOptions o;
  o.data_dir = dir;
  o.fsync = false;
  o.engine.window_steps = 10;
  o.observers = {&first, &second};
  auto job = JobState::Create(Decl(), o, nullptr);
  REQUIRE(job.ok());
  IngestAll(**job, 30, 1);
  (*job)->CloseDue(2);
  REQUIRE((*job)->Flush().ok());

  REQUIRE(first.windows.size() == 3);
  REQUIRE(second.windows.size() == 3);
  // Per window: each observer's window, in list order, then each hears of the verdicts.
  std::vector<std::string> expected;
  for (int w = 0; w < 3; ++w) {
    for (const char* e : {"first:window", "second:window", "first:appended", "second:appended"}) {
      expected.push_back(e);
    }
  }
  CHECK(log == expected);
  const ClosedJobWindow& w = first.windows.back();
  CHECK(w.job == "obs");
  CHECK(w.world_size == kWorld);
  CHECK(w.rank_nodes == std::vector<std::string>{"node-0", "node-0", "node-1", "node-1"});
  CHECK(w.rank_can_capture == std::vector<int8_t>{-1, -1, -1, -1});
  CHECK(w.newest_step == 29);
  CHECK(w.job_control.job() == "obs");
  CHECK(w.now_ns > 0);
  CHECK(w.wall_time_ns > 0);

  // A restored job replays its windows: already told, not again; the verdicts are announced.
  log.clear();
  Logger after("after", &log);
  o.observers = {&after};
  auto restored = JobState::Restore(JournalPath(dir, "obs"), o, nullptr, nullptr, 3);
  REQUIRE(restored.ok());
  CHECK(after.windows.empty());
  CHECK(log == std::vector<std::string>(3, "after:appended"));
  CHECK((*restored)->VerdictsAfter(0).size() == (*job)->VerdictsAfter(0).size());
}

}  // namespace
}  // namespace stagefrontier
