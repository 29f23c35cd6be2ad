// A job on the coordinator: ingest, alignment, accounting and the journal. The central
// property: a job restored from its journal (after a crash at any point) holds exactly the
// state the live job had: same steps, same verdicts, same counters.
#include "daemon/coordinator/job_state.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <random>

#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"
#include "shm/segment_layout_v1.h"

namespace stagefrontier {
namespace {

constexpr int kWorld = 8;

std::string TempDir() {
  char dir[] = "/tmp/sf_jobstate_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  return dir;
}

v1::RankDeclaration Decl(int rank, const std::string& stages =
                                       "data:io,forward:compute,"
                                       "grad_sync:sync,optimizer:compute") {
  v1::RankDeclaration d;
  d.set_job("job-1");
  d.set_rank(rank);
  d.set_world_size(kWorld);
  StageSchema schema = *StageSchema::Parse(stages);
  for (const Stage& s : schema.stages()) {
    v1::Stage* p = d.add_stages();
    p->set_name(s.name);
    p->set_kind(static_cast<v1::StageKind>(s.kind));
  }
  return d;
}

// A job's options in a fresh directory, without fsync.
JobOptions TempJobOptions() {
  JobOptions o;
  o.data_dir = TempDir();
  o.fsync = false;
  return o;
}

// The series `metrics` keeps for "job-1" (Decl's default stages).
JobMetrics MetricsOf(CoordinatorMetrics& metrics) {
  return metrics.ForJob(
      "job-1", *StageSchema::Parse("data:io,forward:compute,grad_sync:sync,optimizer:compute"));
}

// Rank `rank`'s steps [first, last]: from step 100, rank 5's data stage is 15 ms slower and the
// others wait for it in grad_sync.
v1::RankSteps Steps(int rank, int first, int last, std::mt19937* rng) {
  std::uniform_int_distribution<int> jitter(-100'000, 100'000);
  wire::PackedStepsEncoder enc(4);
  for (int s = first; s <= last; ++s) {
    const int64_t slow = 15'000'000;
    int64_t d[4] = {4'000'000 + jitter(*rng), 8'000'000 + jitter(*rng), 300'000, 3'000'000};
    if (s >= 100) (rank == 5 ? d[0] : d[2]) += slow;
    enc.Add(s, d, 0);
  }
  return wire::MakeRankSteps("job-1", rank, enc);
}

std::vector<std::string> Verdicts(const JobState& job) {
  std::vector<std::string> out;
  for (const auto& ev : job.VerdictsAfter(0)) {
    out.push_back(ev.SerializeAsString());
  }
  return out;
}

TEST_CASE("a restored job equals the live one: steps, verdicts, counters") {
  JobOptions o;
  o.data_dir = TempDir();
  o.fsync = false;
  o.engine.window_steps = 50;
  o.aligner.deadline_ns = 1'000'000;
  auto live = JobState::Create(Decl(0), o, nullptr);
  REQUIRE(live.ok());
  std::mt19937 rng(7);
  int64_t now = 1'000'000'000;
  for (int chunk = 0; chunk < 30; ++chunk) {
    for (int r = 0; r < kWorld; ++r) {
      // Rank 7 skips chunk 10 (those steps close partial by deadline) and re-sends chunk 3
      // (duplicates).
      if (r == 7 && chunk == 10) continue;
      auto c = (*live)->Ingest(Steps(r, chunk * 10, chunk * 10 + 9, &rng), "n", now);
      REQUIRE(c.ok());
      if (r == 7 && chunk == 4) {
        auto dup = (*live)->Ingest(Steps(r, 30, 39, &rng), "n", now);
        REQUIRE(dup.ok());
        CHECK(dup->duplicates == 10);
      }
    }
    now += 2'000'000;  // past the deadline: rank 7's missing steps close partial
    (*live)->CloseDue(now);
  }
  REQUIRE((*live)->Flush().ok());
  v1::JobInfo info;
  (*live)->Info(&info);
  CHECK(info.steps_accounted() == 300);
  CHECK(info.partial_steps() == 10);
  const std::vector<std::string> verdicts = Verdicts(**live);
  REQUIRE(verdicts.size() == 6);
  v1::SuspectsReply sus;
  REQUIRE((*live)->Suspects(0, &sus).ok());
  CHECK(sus.verdict().label() == "CLEAR");
  REQUIRE(sus.verdict().suspects_size() > 0);
  CHECK(sus.verdict().suspects(0).stage() == "data");
  CHECK(sus.verdict().suspects(0).rank() == 5);
  CHECK(sus.mean_top_stage() == "grad_sync");  // the dashboard points at the victims' wait

  JournalOpenInfo oi;
  auto restored = JobState::Restore(JournalPath(o.data_dir, "job-1"), o, nullptr, &oi, now);
  REQUIRE(restored.ok());
  CHECK(oi.skipped.empty());
  v1::JobInfo info2;
  (*restored)->Info(&info2);
  CHECK(info2.SerializeAsString() == info.SerializeAsString());
  CHECK(Verdicts(**restored) == verdicts);
  v1::GetStepsReply a, b;
  (*live)->Steps(0, 1000, 1000, &a);
  (*restored)->Steps(0, 1000, 1000, &b);
  CHECK(a.SerializeAsString() == b.SerializeAsString());
  v1::SuspectsReply sus2;
  REQUIRE((*restored)->Suspects(0, &sus2).ok());
  CHECK(sus2.SerializeAsString() == sus.SerializeAsString());

  // Re-accounting a window of the last 100 held steps names the same suspect.
  v1::SuspectsReply w;
  REQUIRE((*restored)->Suspects(100, &w).ok());
  CHECK(w.window() == 100);
  CHECK(w.verdict().suspects(0).rank() == 5);
}

TEST_CASE("declarations: mismatches are refused with a clear reason") {
  JobOptions o;
  o.data_dir = TempDir();
  o.fsync = false;
  auto job = JobState::Create(Decl(0), o, nullptr);
  REQUIRE(job.ok());
  CHECK((*job)->CheckDeclaration(Decl(3)).ok());
  absl::Status s = (*job)->CheckDeclaration(Decl(3, "data:io,forward:compute"));
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("declares schema"));
  v1::RankDeclaration d = Decl(3);
  d.set_world_size(16);
  CHECK((*job)->CheckDeclaration(d).code() == absl::StatusCode::kFailedPrecondition);
  CHECK((*job)->CheckDeclaration(Decl(8)).code() == absl::StatusCode::kOutOfRange);
  // A second Create over the same journal is refused; a bad job id too.
  CHECK(JobState::Create(Decl(0), o, nullptr).status().code() == absl::StatusCode::kAlreadyExists);
  v1::RankDeclaration bad = Decl(0);
  bad.set_job("../etc");
  CHECK(JobState::Create(bad, o, nullptr).status().code() == absl::StatusCode::kInvalidArgument);
  // Malformed packed bytes and out-of-range ranks are refused without keeping anything.
  std::mt19937 rng(1);
  v1::RankSteps rs = Steps(2, 0, 3, &rng);
  rs.set_packed(rs.packed() + "junk");
  CHECK((*job)->Ingest(rs, "n", 0).status().code() == absl::StatusCode::kInvalidArgument);
  rs = Steps(9, 0, 3, &rng);
  CHECK((*job)->Ingest(rs, "n", 0).status().code() == absl::StatusCode::kOutOfRange);
  v1::GetHealthReply h;
  (*job)->Health(&h);
  CHECK(h.ranks(2).rejected() == 1);
  CHECK(h.ranks(2).records_accepted() == 0);
}

TEST_CASE("a journal that is not a job is refused at restore") {
  JobOptions o;
  o.data_dir = TempDir();
  const std::string path = JournalPath(o.data_dir, "x");
  {
    v1::JournalRecord r;
    r.mutable_closed()->set_step(3);
    auto j = JobJournal::Create(path, false, std::span(&r, 1));
    REQUIRE(j.ok());
  }
  auto job = JobState::Restore(path, o, nullptr, nullptr, 0);
  REQUIRE(!job.ok());
  CHECK(job.status().code() == absl::StatusCode::kDataLoss);
  CHECK_THAT(std::string(job.status().message()), Catch::Contains("declaration"));
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

TEST_CASE("steps waiting at a restart get a fresh deadline (regression: closed partial at once)") {
  JobOptions o;
  o.data_dir = TempDir();
  o.fsync = false;
  o.aligner.deadline_ns = 1'000'000'000;
  auto live = JobState::Create(Decl(0), o, nullptr);
  REQUIRE(live.ok());
  std::mt19937 rng(2);
  const int64_t t0 = 5'000'000'000'000;
  for (int r = 0; r < kWorld - 1; ++r) REQUIRE((*live)->Ingest(Steps(r, 0, 4, &rng), "n", t0).ok());
  (*live)->CloseDue(t0);  // rank 7 has not reported: nothing closes
  REQUIRE((*live)->Flush().ok());
  live->reset();
  // Restarted much later on the monotonic clock; rank 7's re-sent steps arrive shortly after.
  const int64_t t1 = t0 + 3'600'000'000'000;
  auto restored = JobState::Restore(JournalPath(o.data_dir, "job-1"), o, nullptr, nullptr, t1);
  REQUIRE(restored.ok());
  CHECK((*restored)->CloseDue(t1 + 1'000) == 0);
  REQUIRE((*restored)->Ingest(Steps(kWorld - 1, 0, 4, &rng), "n", t1 + 2'000).ok());
  CHECK((*restored)->CloseDue(t1 + 3'000) == 5);
  v1::JobInfo info;
  (*restored)->Info(&info);
  CHECK(info.partial_steps() == 0);
}

// Steps [first, last] of `rank` with fixed stages (data 4 ms, forward 8 ms, grad_sync 0.3 ms,
// optimizer 3 ms) and the probe's all-reduce inside grad_sync [12, 12.3] ms, or, with
// `ahead_ns` > 0, still running that long after grad_sync was marked finished.
v1::RankSteps StepsWithCollectives(int rank, int first, int last, int64_t ahead_ns) {
  wire::PackedStepsEncoder enc(4);
  for (int s = first; s <= last; ++s) {
    int64_t d[4] = {4'000'000, 8'000'000, 300'000, 3'000'000};
    enc.Add(s, d, 0);
  }
  v1::RankSteps rs = wire::MakeRankSteps("job-1", rank, enc);
  for (int s = first; s <= last; ++s) {
    v1::CollectiveInterval* c = rs.add_collectives();
    c->set_step(s);
    c->set_op(0);
    c->set_bytes(1 << 20);
    c->set_call_offset_ns(12'050'000);
    c->set_start_offset_ns(12'100'000);
    c->set_end_offset_ns(12'250'000 + (ahead_ns > 0 ? 50'000 + ahead_ns : 0));
  }
  return rs;
}

TEST_CASE("probe intervals: bracketed ones pass, marks running ahead are found, bad ones refused") {
  JobOptions o;
  o.data_dir = TempDir();
  o.fsync = false;
  o.aligner.deadline_ns = 1'000'000;
  auto job = JobState::Create(Decl(0), o, nullptr);
  REQUIRE(job.ok());
  for (int r = 0; r < kWorld; ++r) {
    REQUIRE((*job)->Ingest(StepsWithCollectives(r, 0, 19, r == 6 ? 4'000'000 : 0), "n", 1).ok());
  }
  CHECK((*job)->CloseDue(2) == 20);
  v1::GetHealthReply health;
  (*job)->Health(&health);
  CHECK(health.probe_collectives() == 20 * kWorld);
  CHECK(health.probe_violations() == 20);
  REQUIRE(health.probe_findings_size() == kWorld);
  const v1::ProbeFinding& f = health.probe_findings(0);
  CHECK(f.rank() == 6);
  CHECK(f.stage() == "grad_sync");
  CHECK(f.violations() == 20);
  CHECK(f.max_overrun_ns() == 4'000'000);
  CHECK_THAT(f.explanation(), Catch::Contains("run ahead of the GPU"));
  CHECK(health.probe_rules() == "*:grad_sync");
  // The intervals are journaled with their steps: a restart finds the same.
  REQUIRE((*job)->Flush().ok());
  auto restored = JobState::Restore(JournalPath(o.data_dir, "job-1"), o, nullptr, nullptr, 5);
  REQUIRE(restored.ok());
  v1::GetHealthReply after;
  (*restored)->Health(&after);
  CHECK(after.probe_violations() == 20);
  CHECK(after.probe_collectives() == 20 * kWorld);

  // Malformed intervals are refused with the message naming them; nothing is kept.
  v1::RankSteps bad = StepsWithCollectives(0, 20, 21, 0);
  bad.mutable_collectives(0)->set_step(99);
  CHECK_THAT(std::string((*job)->Ingest(bad, "n", 3).status().message()),
             Catch::Contains("collective 0 (step 99): names a step this message does not carry"));
  bad.mutable_collectives(0)->set_step(20);
  bad.mutable_collectives(0)->set_end_offset_ns(1);
  CHECK_THAT(std::string((*job)->Ingest(bad, "n", 3).status().message()),
             Catch::Contains("times out of order"));
  bad.mutable_collectives(0)->set_end_offset_ns(12'240'000);
  bad.mutable_collectives(0)->set_op(9);
  CHECK_THAT(std::string((*job)->Ingest(bad, "n", 3).status().message()),
             Catch::Contains("unknown operation 9"));
}

TEST_CASE("bracketing rules that do not fit a job fall back to the default, and say so") {
  JobOptions o;
  o.data_dir = TempDir();
  o.fsync = false;
  o.probe_bracket_rules = "all_reduce:backward";
  auto job = JobState::Create(Decl(0), o, nullptr);
  REQUIRE(job.ok());
  v1::GetHealthReply health;
  (*job)->Health(&health);
  CHECK_THAT(health.probe_rules(), Catch::Contains("*:grad_sync"));
  CHECK_THAT(health.probe_rules(), Catch::Contains("does not fit this job"));
}

// Regression: the rank gauges were recounted over every rank after every batch, a cost of
// nodes x world per step (quadratic at 100,000 ranks; docs/results.md "Coordinator ingest").
TEST_CASE("rank gauges are recounted per closed step or every 250 ms, not per batch") {
  CoordinatorMetrics metrics;
  JobOptions o = TempJobOptions();
  o.aligner.deadline_ns = 10'000'000'000;  // nothing closes by deadline here
  auto job = JobState::Create(Decl(0), o, &metrics);
  REQUIRE(job.ok());
  const JobMetrics m = MetricsOf(metrics);
  std::mt19937 rng(1);
  int64_t now = 1'000'000'000;
  for (int r = 0; r < kWorld; ++r) {
    REQUIRE((*job)->Ingest(Steps(r, 0, 9, &rng), "n", now).ok());
    (*job)->CloseDue(now);
  }
  CHECK(m.ranks_reporting->Value() == kWorld);  // counted when the steps closed
  // Rank 0 runs 30 steps ahead (more than lagging_steps = 20); nothing closes.
  now += 1'000'000;
  REQUIRE((*job)->Ingest(Steps(0, 10, 39, &rng), "n", now).ok());
  CHECK((*job)->CloseDue(now) == 0);
  CHECK(m.ranks_lagging->Value() == 0);  // not recounted after this batch
  now += 300'000'000;
  CHECK((*job)->CloseDue(now) == 0);
  CHECK(m.ranks_lagging->Value() == kWorld - 1);  // recounted 250 ms after the last count
  CHECK(m.ranks_reporting->Value() == 1);
}

// The per-outcome counters are only touched when their count is not 0 (a cost per message);
// each outcome must still be counted.
TEST_CASE("rank-step counters count accepted, duplicate, late and far-ahead records") {
  CoordinatorMetrics metrics;
  JobOptions o = TempJobOptions();
  o.aligner.deadline_ns = 10'000'000'000;
  o.aligner.max_step_lead = 100;
  auto job = JobState::Create(Decl(0), o, &metrics);
  REQUIRE(job.ok());
  const JobMetrics m = MetricsOf(metrics);
  std::mt19937 rng(1);
  int64_t now = 1'000'000'000;
  for (int r = 0; r < kWorld; ++r) REQUIRE((*job)->Ingest(Steps(r, 0, 4, &rng), "n", now).ok());
  (*job)->CloseDue(now);
  CHECK(m.rank_steps_accepted->Value() == 5 * kWorld);
  CHECK(m.rank_steps_duplicate->Value() == 0);
  CHECK(m.rank_steps_late->Value() == 0);
  CHECK(m.rank_steps_rejected->Value() == 0);
  // Rank 0's steps 5..7 open; its 5..6 again are duplicates.
  REQUIRE((*job)->Ingest(Steps(0, 5, 7, &rng), "n", now).ok());
  REQUIRE((*job)->Ingest(Steps(0, 5, 6, &rng), "n", now).ok());
  CHECK(m.rank_steps_accepted->Value() == 5 * kWorld + 3);
  CHECK(m.rank_steps_duplicate->Value() == 2);
  // Steps 5..7 close at their deadline without rank 1; its records for them come late.
  now += 2 * o.aligner.deadline_ns + 1;
  CHECK((*job)->CloseDue(now) == 3);
  REQUIRE((*job)->Ingest(Steps(1, 5, 7, &rng), "n", now).ok());
  CHECK(m.rank_steps_late->Value() == 3);
  // A step far past the job's newest is refused.
  REQUIRE((*job)->Ingest(Steps(2, 500, 500, &rng), "n", now).ok());
  CHECK(m.rank_steps_rejected->Value() == 1);
  CHECK(m.rank_steps_accepted->Value() == 5 * kWorld + 3);
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

// Steps [0, 80) of a healthy job whose rank 3 runs a profiler on steps 20..29: its forward is
// 30 ms slower there, and its records say so when `flagged`.
std::unique_ptr<JobState> ProfiledJob(const std::string& dir, bool flagged, int64_t* now) {
  JobOptions o;
  o.data_dir = dir;
  o.fsync = false;
  o.engine.window_steps = 50;
  o.aligner.deadline_ns = 1'000'000;
  auto job = JobState::Create(Decl(0), o, nullptr);
  REQUIRE(job.ok());
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> jitter(-100'000, 100'000);
  for (int r = 0; r < kWorld; ++r) {
    wire::PackedStepsEncoder enc(4);
    for (int s = 0; s < 80; ++s) {
      int64_t d[4] = {4'000'000 + jitter(rng), 8'000'000 + jitter(rng), 300'000, 3'000'000};
      const bool profiled = r == 3 && s >= 20 && s < 30;
      if (s >= 20 && s < 30) (profiled ? d[1] : d[2]) += 30'000'000;
      enc.Add(s, d, profiled && flagged ? shm::v1::kRecordTraceCaptured : 0);
    }
    REQUIRE((*job)->Ingest(wire::MakeRankSteps("job-1", r, enc), "n", *now).ok());
  }
  *now += 2'000'000;
  (*job)->CloseDue(*now);
  REQUIRE((*job)->Flush().ok());
  return std::move(*job);
}

TEST_CASE("profiled steps are closed and counted but left out of the evidence, also on replay") {
  const std::string dir = TempDir();
  int64_t now = 1'000'000'000;
  std::unique_ptr<JobState> job = ProfiledJob(dir, /*flagged=*/true, &now);
  v1::JobInfo info;
  job->Info(&info);
  CHECK(info.steps_accounted() == 80);
  CHECK(info.captured_steps() == 10);
  CHECK(info.last_step() == 79);
  // The window of 50 steps closed at step 59 (50 steps not captured): HEALTHY.
  const auto verdicts = job->VerdictsAfter(0);
  REQUIRE(verdicts.size() == 1);
  CHECK(verdicts[0].verdict().label() == "HEALTHY");
  CHECK(verdicts[0].verdict().last_step() == 59);
  v1::GetStepsReply steps;
  job->Steps(20, 29, 100, &steps);
  CHECK(steps.steps().empty());
  // A restart replays the journal to the same decisions.
  JournalOpenInfo oi;
  JobOptions o;
  o.data_dir = dir;
  o.fsync = false;
  o.engine.window_steps = 50;
  o.aligner.deadline_ns = 1'000'000;
  auto restored = JobState::Restore(JournalPath(dir, "job-1"), o, nullptr, &oi, now);
  REQUIRE(restored.ok());
  v1::JobInfo info2;
  (*restored)->Info(&info2);
  CHECK(info2.SerializeAsString() == info.SerializeAsString());

  // The same slowdown unflagged is evidence: the window names rank 3's forward.
  int64_t now2 = 1'000'000'000;
  std::unique_ptr<JobState> plain = ProfiledJob(TempDir(), /*flagged=*/false, &now2);
  const auto v2 = plain->VerdictsAfter(0);
  REQUIRE_FALSE(v2.empty());
  CHECK(v2[0].verdict().label() != "HEALTHY");
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

v1::SlotHealth Slot(int rank, const std::string& owner, uint64_t pending = 0) {
  v1::SlotHealth h;
  h.set_job("job-1");
  h.set_rank(rank);
  h.set_owner(owner);
  h.set_pending(pending);
  return h;
}

struct FinishedRecorder : VerdictObserver {
  void OnJobFinished(const std::string& job, int64_t last_step, int64_t) override {
    told.emplace_back(job, last_step);
  }
  std::vector<std::pair<std::string, int64_t>> told;
};

std::string RankState(const JobState& job, int rank) {
  v1::GetHealthReply h;
  job.Health(&h);
  return h.ranks(rank).state();
}

// Regression (hostile input): a slot's last error, owner and probe backend were kept as sent,
// a message of up to 16 MiB held for every rank of the job.
TEST_CASE("the strings a slot's health relays are bounded") {
  JobOptions o;
  o.data_dir = TempDir();
  o.fsync = false;
  auto created = JobState::Create(Decl(0), o, nullptr);
  REQUIRE(created.ok());
  v1::SlotHealth h = Slot(1, std::string(100'000, 'o'));
  h.set_last_error(std::string(1'000'000, 'e'));
  h.set_probe_backend(std::string(100'000, 'p'));
  (*created)->UpdateStubHealth(h, "n");
  v1::GetHealthReply health;
  (*created)->Health(&health);
  CHECK(health.ranks(1).last_error().size() == 512);
  CHECK(health.ranks(1).owner().size() == 64);
  CHECK(health.ranks(1).probe_backend().size() == 64);
}

// Issue 32: the layout source a sidecar reports reaches GetHealth; a name the coordinator
// does not know (a hostile or newer sidecar) is shown as "invalid", never passed on.
TEST_CASE("a rank's layout source travels from its slot health to the job's health") {
  CoordinatorMetrics metrics;
  JobOptions o = TempJobOptions();
  auto created = JobState::Create(Decl(0), o, &metrics);
  REQUIRE(created.ok());
  JobState& job = **created;
  v1::GetHealthReply before;
  job.Health(&before);
  CHECK(before.ranks(2).layout_source().empty());  // nothing reported yet
  v1::SlotHealth h = Slot(2, "alive");
  h.set_layout_source("not_inferred");
  job.UpdateStubHealth(h, "n");
  h = Slot(3, "alive");
  h.set_layout_source(std::string(5000, 'x'));
  job.UpdateStubHealth(h, "n");
  v1::GetHealthReply after;
  job.Health(&after);
  CHECK(after.ranks(2).layout_source() == "not_inferred");
  CHECK(after.ranks(3).layout_source() == "invalid");
  CHECK(after.ranks(0).layout_source().empty());
}

// Issue 30, item 10: once every stub released its slot cleanly the job reads "finished".
TEST_CASE("ranks whose stubs released their slots after reporting are finished, then the job") {
  CoordinatorMetrics metrics;
  FinishedRecorder recorder;
  JobOptions o;
  o.data_dir = TempDir();
  o.fsync = false;
  o.aligner.deadline_ns = 1'000'000;
  o.observers = {&recorder};
  auto created = JobState::Create(Decl(0), o, &metrics);
  REQUIRE(created.ok());
  JobState& job = **created;
  const JobMetrics m = MetricsOf(metrics);
  std::mt19937 rng(3);
  int64_t now = 1'000'000'000;
  // Rank 7 has not reported yet: released before reporting is not finished.
  for (int r = 0; r < kWorld - 1; ++r) {
    REQUIRE(job.Ingest(Steps(r, 0, 19, &rng), "n", now).ok());
    job.UpdateStubHealth(Slot(r, "alive"), "n");
  }
  job.UpdateStubHealth(Slot(7, "none"), "n");
  CHECK(RankState(job, 0) == "reporting");
  CHECK(RankState(job, 7) == "unseen");
  REQUIRE(job.Ingest(Steps(7, 0, 19, &rng), "n", now).ok());
  job.UpdateStubHealth(Slot(7, "alive"), "n");
  now += 2'000'000;
  job.CloseDue(now);

  // Ranks 0..6 exit cleanly; rank 7's slot still holds unread records.
  for (int r = 0; r < kWorld - 1; ++r) job.UpdateStubHealth(Slot(r, "none"), "n");
  job.UpdateStubHealth(Slot(7, "none", /*pending=*/5), "n");
  CHECK(RankState(job, 0) == "finished");
  CHECK(RankState(job, 7) == "reporting");
  v1::JobInfo info;
  job.Info(&info);
  CHECK(info.state() == "running");
  CHECK(recorder.told.empty());

  job.UpdateStubHealth(Slot(7, "none"), "n");
  v1::GetHealthReply h;
  job.Health(&h);
  CHECK(h.state() == "finished");
  CHECK(h.finished() == kWorld);
  CHECK(h.reporting() == 0);
  CHECK(h.missing() == 0);
  info.Clear();
  job.Info(&info);
  CHECK(info.state() == "finished");
  CHECK(info.ranks_missing() == 0);
  REQUIRE(recorder.told.size() == 1);  // told once
  CHECK(recorder.told[0] == std::make_pair(std::string("job-1"), int64_t{19}));
  job.UpdateStubHealth(Slot(3, "none"), "n");
  CHECK(recorder.told.size() == 1);
  // The gauges count them finished (recounted within 250 ms), none missing.
  now += 300'000'000;
  job.CloseDue(now);
  CHECK(m.ranks_finished->Value() == kWorld);
  CHECK(m.ranks_missing->Value() == 0);
  CHECK(m.ranks_reporting->Value() == 0);

  // A rank that comes back (a new owner) makes the job running again; finishing tells again.
  job.UpdateStubHealth(Slot(2, "alive"), "n");
  CHECK(RankState(job, 2) == "reporting");
  info.Clear();
  job.Info(&info);
  CHECK(info.state() == "running");
  job.UpdateStubHealth(Slot(2, "none"), "n");
  CHECK(recorder.told.size() == 2);
  // A dead owner is not finished.
  job.UpdateStubHealth(Slot(4, "dead"), "n");
  CHECK(RankState(job, 4) != "finished");
}

// Issue 30, item 10: a window of 50 steps that spans 60 because 10 were profiled says so.
TEST_CASE("verdict windows count the profiled steps left out of their span") {
  int64_t now = 1'000'000'000;
  std::unique_ptr<JobState> job = ProfiledJob(TempDir(), /*flagged=*/true, &now);
  const auto verdicts = job->VerdictsAfter(0);
  REQUIRE(verdicts.size() == 1);
  CHECK(verdicts[0].verdict().first_step() == 0);
  CHECK(verdicts[0].verdict().last_step() == 59);
  CHECK(verdicts[0].verdict().steps() == 50);
  CHECK(verdicts[0].verdict().profiled_steps_left_out() == 10);
  // Re-accounting the held steps: 70 steps spanning 0..79.
  v1::SuspectsReply r;
  REQUIRE(job->Suspects(100, &r).ok());
  CHECK(r.window() == 70);
  CHECK(r.verdict().profiled_steps_left_out() == 10);
  // Unflagged, nothing is left out.
  int64_t now2 = 1'000'000'000;
  std::unique_ptr<JobState> plain = ProfiledJob(TempDir(), /*flagged=*/false, &now2);
  CHECK(plain->VerdictsAfter(0)[0].verdict().profiled_steps_left_out() == 0);
}

// A pipeline of 2 stages x 4 replicas: ranks 0-3 are stage 0 (data 4 ms), ranks 4-7 stage 1
// (data 1 ms, by design); each stage's replicas wait for the last of them in grad_sync. From
// step 60 rank 6's forward is 12 ms slower.
int64_t PipelineArrival(int rank, int step) {
  const int64_t jitter = ((step * 7919 + rank * 104729) % 201 - 100) * 1000;  // +-100 us
  return (rank < 4 ? 4'000'000 : 1'000'000) + 8'000'000 + jitter +
         (step >= 60 && rank == 6 ? 12'000'000 : 0);
}

v1::RankSteps PipelineSteps(int rank, int first, int last, std::mt19937* /*rng*/) {
  wire::PackedStepsEncoder enc(4);
  const int stage_first = rank / 4 * 4;
  for (int s = first; s <= last; ++s) {
    int64_t latest = 0;
    for (int r = stage_first; r < stage_first + 4; ++r)
      latest = std::max(latest, PipelineArrival(r, s));
    const int64_t arrive = PipelineArrival(rank, s);
    const int64_t data = rank < 4 ? 4'000'000 : 1'000'000;
    int64_t d[4] = {data, arrive - data, 300'000 + latest - arrive, 3'000'000};
    enc.Add(s, d, 0);
  }
  return wire::MakeRankSteps("job-1", rank, enc);
}

v1::RankDeclaration PipelineDecl(int rank, uint64_t generation = 1) {
  v1::RankDeclaration d = Decl(rank);
  d.set_owner_generation(generation);
  d.mutable_layout()->set_pipeline_stage(rank / 4);
  d.mutable_layout()->set_pipeline_stages(2);
  d.mutable_layout()->set_tensor_rank(0);
  d.mutable_layout()->set_tensor_size(1);
  return d;
}

void FeedPipeline(JobState& job, int first_chunk, int chunks, std::mt19937* rng, int64_t* now) {
  for (int chunk = first_chunk; chunk < first_chunk + chunks; ++chunk) {
    for (int r = 0; r < kWorld; ++r) {
      REQUIRE(job.Ingest(PipelineSteps(r, chunk * 10, chunk * 10 + 9, rng), "n", *now).ok());
    }
    *now += 2'000'000;
    job.CloseDue(*now);
  }
}

TEST_CASE(
    "a declared pipeline layout: a verdict per stage's group, the job's from its groups, "
    "the same after a restart") {
  JobOptions o;
  o.data_dir = TempDir();
  o.fsync = false;
  o.engine.window_steps = 40;
  o.aligner.deadline_ns = 1'000'000;
  auto live = JobState::Create(PipelineDecl(0), o, nullptr);
  REQUIRE(live.ok());
  for (int r = 0; r < kWorld; ++r) (*live)->NoteOwner(PipelineDecl(r), "n");
  std::mt19937 rng(11);
  int64_t now = 1'000'000'000;
  FeedPipeline(**live, 0, 16, &rng, &now);
  REQUIRE((*live)->Flush().ok());

  std::vector<std::string> groups;
  for (const auto& ev : (*live)->VerdictsAfter(0)) groups.push_back(ev.verdict().group());
  CHECK(groups == std::vector<std::string>{"job", "pp0", "pp1", "job", "pp0", "pp1", "job", "pp0",
                                           "pp1", "job", "pp0", "pp1"});
  // Steps 0-39: stage 1's short data is by design, not a straggler.
  const v1::Verdict first = (*live)->VerdictsAfter(0)[0].verdict();
  CHECK(first.label() == "HEALTHY");
  for (const auto& ev : (*live)->VerdictsAfter(0)) {
    CHECK_FALSE(std::count(ev.verdict().unreliable().begin(), ev.verdict().unreliable().end(),
                           "sync_never_waits"));
  }
  v1::SuspectsReply sus;
  REQUIRE((*live)->Suspects(0, &sus).ok());
  INFO(sus.verdict().explanation());
  CHECK(sus.verdict().label() == "CLEAR");
  CHECK(sus.verdict().sync_group() == "pp1");
  REQUIRE(sus.verdict().suspects_size() > 0);
  CHECK(sus.verdict().suspects(0).stage() == "forward");
  CHECK(sus.verdict().suspects(0).rank() == 6);

  JournalOpenInfo oi;
  auto restored = JobState::Restore(JournalPath(o.data_dir, "job-1"), o, nullptr, &oi, now);
  REQUIRE(restored.ok());
  CHECK(Verdicts(**restored) == Verdicts(**live));
  v1::SuspectsReply sus2;
  REQUIRE((*restored)->Suspects(0, &sus2).ok());
  CHECK(sus2.SerializeAsString() == sus.SerializeAsString());
}

TEST_CASE("a layout that does not fit is refused: one group and layout_rejected, until fixed") {
  JobOptions o;
  o.data_dir = TempDir();
  o.fsync = false;
  o.engine.window_steps = 40;
  o.aligner.deadline_ns = 1'000'000;
  auto job = JobState::Create(PipelineDecl(0), o, nullptr);
  REQUIRE(job.ok());
  for (int r = 0; r < kWorld; ++r) {
    // Ranks 6 and 7 declare no layout.
    v1::RankDeclaration none = Decl(r);
    none.set_owner_generation(1);
    (*job)->NoteOwner(r < 6 ? PipelineDecl(r) : none, "n");
  }
  std::mt19937 rng(5);
  int64_t now = 1'000'000'000;
  FeedPipeline(**job, 0, 4, &rng, &now);
  auto last = [&] { return (*job)->VerdictsAfter(0).back().verdict(); };
  auto rejected = [&] {
    const v1::Verdict v = last();
    return std::count(v.unreliable().begin(), v.unreliable().end(), "layout_rejected") > 0;
  };
  CHECK(last().group() == "job");
  CHECK(rejected());
  v1::GetHealthReply h;
  (*job)->Health(&h);
  std::string details;
  for (const auto& c : h.detector_conditions()) details += c.detail() + "\n";
  CHECK_THAT(details, Catch::Contains("ranks 0, 1, 2, 3, 4, 5 declared a layout, ranks 6, 7 none"));
  // Ranks 6 and 7 come back as new processes that declare it: groups from the next window on.
  for (int r = 6; r < 8; ++r) (*job)->NoteOwner(PipelineDecl(r, /*generation=*/2), "n");
  FeedPipeline(**job, 4, 4, &rng, &now);
  CHECK(last().group() == "pp1");
  CHECK_FALSE(rejected());
  // A rank that changes its declaration mid-job to another pipeline size: refused again.
  v1::RankDeclaration other = PipelineDecl(2, /*generation=*/3);
  other.mutable_layout()->set_pipeline_stages(4);
  (*job)->NoteOwner(other, "n");
  FeedPipeline(**job, 8, 4, &rng, &now);
  CHECK(last().group() == "job");
  CHECK(rejected());
}

// Two ranks per node (nA: 0, 1 ... nD: 6, 7); from step 40 both ranks of nD (ranks from
// `first_slow` on) are 10 ms slower in data (a throttled machine) and the others wait for them
// in grad_sync.
v1::RankSteps NodeSteps(int rank, int first, int last, int first_slow = 6) {
  wire::PackedStepsEncoder enc(4);
  for (int s = first; s <= last; ++s) {
    const int64_t jitter = ((s * 7919 + rank * 104729) % 201 - 100) * 1000;
    int64_t d[4] = {4'000'000 + jitter, 8'000'000, 300'000 - jitter, 3'000'000};
    if (s >= 40) (rank >= first_slow ? d[0] : d[2]) += 10'000'000;
    enc.Add(s, d, 0);
  }
  return wire::MakeRankSteps("job-1", rank, enc);
}

std::string Node(int rank) { return std::string("n") + static_cast<char>('A' + rank / 2); }

TEST_CASE("half the job on one slow node (two sidecars): named by comparing the two nodes") {
  // nA: ranks 0-3, nB: 4-7. Against the per-step median (half made of nB's own ranks) the
  // gap cancels; rank by rank against nA's ranks it does not (daemon/nodes/node_shift.h).
  JobOptions o;
  o.data_dir = TempDir();
  o.fsync = false;
  o.engine.window_steps = 50;
  o.aligner.deadline_ns = 1'000'000;
  auto live = JobState::Create(Decl(0), o, nullptr);
  REQUIRE(live.ok());
  auto half = [](int r) { return std::string(r < 4 ? "nA" : "nB"); };
  for (int r = 0; r < kWorld; ++r) {
    v1::RankDeclaration d = Decl(r);
    d.set_owner_generation(1);
    (*live)->NoteOwner(d, half(r));
  }
  int64_t now = 1'000'000'000;
  for (int chunk = 0; chunk < 15; ++chunk) {
    for (int r = 0; r < kWorld; ++r) {
      REQUIRE((*live)
                  ->Ingest(NodeSteps(r, chunk * 10, chunk * 10 + 9, /*first_slow=*/4), half(r), now)
                  .ok());
    }
    now += 2'000'000;
    (*live)->CloseDue(now);
  }
  REQUIRE((*live)->Flush().ok());
  v1::SuspectsReply sus;
  REQUIRE((*live)->Suspects(0, &sus).ok());
  INFO(sus.verdict().label() << ": " << sus.verdict().explanation());
  CHECK(sus.verdict().node() == "nB");
  CHECK(sus.verdict().label() == "CLEAR");
  CHECK_THAT(sus.verdict().explanation(),
             Catch::StartsWith("node nB: all 4 of its ranks slow in data"));
  const auto events = (*live)->VerdictsAfter(0);
  REQUIRE(events.size() == 3);
  CHECK(events.back().verdict().node() == "nB");

  JournalOpenInfo oi;
  auto restored = JobState::Restore(JournalPath(o.data_dir, "job-1"), o, nullptr, &oi, now);
  REQUIRE(restored.ok());
  CHECK(Verdicts(**restored) == Verdicts(**live));
}

TEST_CASE("every rank of one node slow: the verdict names the node, also after a restart") {
  JobOptions o;
  o.data_dir = TempDir();
  o.fsync = false;
  o.engine.window_steps = 50;
  o.aligner.deadline_ns = 1'000'000;
  auto live = JobState::Create(Decl(0), o, nullptr);
  REQUIRE(live.ok());
  for (int r = 0; r < kWorld; ++r) {
    v1::RankDeclaration d = Decl(r);
    d.set_owner_generation(1);
    (*live)->NoteOwner(d, Node(r));
  }
  int64_t now = 1'000'000'000;
  for (int chunk = 0; chunk < 15; ++chunk) {
    for (int r = 0; r < kWorld; ++r) {
      REQUIRE((*live)->Ingest(NodeSteps(r, chunk * 10, chunk * 10 + 9), Node(r), now).ok());
    }
    now += 2'000'000;
    (*live)->CloseDue(now);
  }
  REQUIRE((*live)->Flush().ok());
  v1::SuspectsReply sus;
  REQUIRE((*live)->Suspects(0, &sus).ok());
  INFO(sus.verdict().explanation());
  std::string cells;
  for (const auto& c : sus.excess_cells()) {
    cells += c.stage() + ":" + std::to_string(c.rank()) + "=" + std::to_string(c.excess_ns()) + " ";
  }
  INFO(cells);
  CHECK(sus.verdict().node() == "nD");
  CHECK(sus.verdict().label() == "CLEAR");
  CHECK_THAT(sus.verdict().explanation(),
             Catch::StartsWith("node nD: all 2 of its ranks slow in data"));
  const auto events = (*live)->VerdictsAfter(0);
  REQUIRE(events.size() == 3);
  CHECK(events.back().verdict().node() == "nD");

  JournalOpenInfo oi;
  auto restored = JobState::Restore(JournalPath(o.data_dir, "job-1"), o, nullptr, &oi, now);
  REQUIRE(restored.ok());
  CHECK(Verdicts(**restored) == Verdicts(**live));
}

}  // namespace
}  // namespace stagefrontier
