// A job's stall (stall_watch.h through JobState): decided between windows from the ranks'
// open stages, journaled, reported by Suspects, Health, Info and the verdict events, still
// reported after a restart, and ended when the job advances again.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/coordinator/job_state.h"
#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"
#include "shm/monotonic_clock.h"

namespace stagefrontier {
namespace {

constexpr int kWorld = 3;
constexpr int64_t kS = 1'000'000'000;

std::string TempDir() {
  char dir[] = "/tmp/sf_jobstall_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  return dir;
}

v1::RankDeclaration Decl(int rank) {
  v1::RankDeclaration d;
  d.set_job("hang");
  d.set_rank(rank);
  d.set_world_size(kWorld);
  StageSchema schema = *StageSchema::Parse("data:io,forward:compute,grad_sync:sync");
  for (const Stage& s : schema.stages()) {
    v1::Stage* p = d.add_stages();
    p->set_name(s.name);
    p->set_kind(static_cast<v1::StageKind>(s.kind));
  }
  return d;
}

// Steps [first, last] of every rank, 10 ms each.
void Feed(JobState& job, int first, int last) {
  for (int r = 0; r < kWorld; ++r) {
    wire::PackedStepsEncoder enc(3);
    for (int s = first; s <= last; ++s) {
      int64_t d[3] = {1'000'000, 6'000'000, 3'000'000};
      enc.Add(s, d, 0);
    }
    REQUIRE(job.Ingest(wire::MakeRankSteps("hang", r, enc), "node-a", 1).ok());
  }
  job.CloseDue(1);
  REQUIRE(job.Flush().ok());
}

// What the sidecar says of rank `rank`: open in `stage` of `step` for `age_ns`.
void Position(JobState& job, int rank, int64_t step, const std::string& stage, int64_t age_ns,
              const std::string& owner = "alive", uint64_t stream = 0,
              const std::string& exit_reason = "") {
  v1::SlotHealth h;
  h.set_job("hang");
  h.set_rank(rank);
  h.set_owner(owner);
  h.set_exit_reason(exit_reason);
  h.set_open_known(true);
  h.set_open_step(step);
  h.set_open_stage(stage);
  h.set_open_age_ns(age_ns);
  job.UpdateStubHealth(h, "node-a", stream);
}

// Rank 0 in forward of `step`, ranks 1 and 2 waiting in grad_sync, each open for `age_ns`.
void HungAt(JobState& job, int64_t step, int64_t age_ns) {
  Position(job, 0, step, "forward", age_ns);
  Position(job, 1, step, "grad_sync", age_ns);
  Position(job, 2, step, "grad_sync", age_ns);
}

JobOptions Options(const std::string& dir) {
  JobOptions o;
  o.data_dir = dir;
  o.fsync = false;
  o.stall.floor_ns = 2 * kS;
  return o;
}

TEST_CASE("a hung rank: STALLED at once, journaled, restored, then RESUMED") {
  const std::string dir = TempDir();
  CoordinatorMetrics metrics;
  auto job = JobState::Create(Decl(0), Options(dir), &metrics);
  REQUIRE(job.ok());
  Feed(**job, 0, 49);
  const int64_t t0 = 100 * kS;
  (*job)->CheckStall(t0);  // the job's frontier, step 49, seen now
  REQUIRE((*job)->VerdictsAfter(0).size() == 0);

  HungAt(**job, 50, 3 * kS);
  (*job)->CheckStall(t0 + kS);  // under the 2 s floor (the median step is 10 ms)
  CHECK((*job)->VerdictsAfter(0).empty());
  (*job)->CheckStall(t0 + 3 * kS);
  std::vector<v1::VerdictEvent> events = (*job)->VerdictsAfter(0);
  REQUIRE(events.size() == 1);
  const v1::Verdict& v = events[0].verdict();
  CHECK(v.label() == "STALLED");
  CHECK(v.reason() == "hung");
  REQUIRE(v.stall().ranks_size() == 3);
  CHECK(v.stall().ranks(0).rank() == 0);
  CHECK(v.stall().ranks(0).role() == "stuck");
  CHECK(v.stall().ranks(0).stage() == "forward");
  CHECK(v.stall().ranks(0).step() == 50);
  CHECK(v.stall().frontier_step() == 49);
  CHECK(v.stall().alarm());

  // The same stall a second later is no new event; Suspects and Info say it.
  (*job)->CheckStall(t0 + 4 * kS);
  CHECK((*job)->VerdictsAfter(0).size() == 1);
  v1::SuspectsReply s;
  REQUIRE((*job)->Suspects(0, &s).ok());
  CHECK(s.verdict().label() == "STALLED");
  CHECK(s.verdict().explanation().rfind("rank 0 stuck in forward of step 50", 0) == 0);
  v1::JobInfo info;
  (*job)->Info(&info);
  CHECK(info.last_label() == "STALLED");
  v1::GetHealthReply health;
  (*job)->Health(&health);
  CHECK(health.stall().reason() == "hung");
  CHECK(health.ranks(0).open_stage() == "forward");
  CHECK(health.ranks(0).open_known());
  CHECK(health.ranks(0).open_age_ns() >= 3 * kS);
  REQUIRE((*job)->Flush().ok());

  // A restarted coordinator still reports it.
  JournalOpenInfo opened;
  auto restored = JobState::Restore(JournalPath(dir, "hang"), Options(dir), nullptr, &opened, 5);
  REQUIRE(restored.ok());
  (*restored)->CheckStall(t0 + 10 * kS);
  v1::SuspectsReply again;
  REQUIRE((*restored)->Suspects(0, &again).ok());
  CHECK(again.verdict().label() == "STALLED");
  CHECK(again.verdict().stall().ranks(0).rank() == 0);
  CHECK((*restored)->VerdictsAfter(0).size() == 1);

  // Progress ends it, with its duration.
  Feed(**job, 50, 52);
  (*job)->CheckStall(t0 + 5 * kS);
  events = (*job)->VerdictsAfter(0);
  REQUIRE(events.size() == 2);
  CHECK(events[1].verdict().label() == "RESUMED");
  CHECK(events[1].verdict().stall().ended());
  v1::SuspectsReply after;
  REQUIRE((*job)->Suspects(0, &after).ok());
  CHECK(after.verdict().label() != "STALLED");
}

TEST_CASE("a paused job is not stalled, nor one whose ranks all finished") {
  const std::string dir = TempDir();
  auto job = JobState::Create(Decl(0), Options(dir), nullptr);
  REQUIRE(job.ok());
  Feed(**job, 0, 9);
  (*job)->CheckStall(kS);
  (*job)->SetPaused(true);
  (*job)->CheckStall(60 * kS);
  CHECK((*job)->VerdictsAfter(0).empty());
  (*job)->SetPaused(false);
  for (int r = 0; r < kWorld; ++r) Position(**job, r, 9, "", kS, "none");
  (*job)->CheckStall(120 * kS);
  CHECK((*job)->VerdictsAfter(0).empty());
}

TEST_CASE("a rank released on an uncaught exception is gone mid-step, not finished") {
  const std::string dir = TempDir();
  auto job = JobState::Create(Decl(0), Options(dir), nullptr);
  REQUIRE(job.ok());
  Feed(**job, 0, 9);
  (*job)->CheckStall(kS);
  // Rank 1 raised in forward of step 10 and released its slot; ranks 0 and 2 wait.
  Position(**job, 0, 10, "grad_sync", kS);
  Position(**job, 1, 10, "forward", kS, "none", 0, "exception");
  Position(**job, 2, 10, "grad_sync", kS);
  v1::JobInfo info;
  (*job)->Info(&info);
  CHECK(info.state() != "finished");
  (*job)->CheckStall(10 * kS);
  auto events = (*job)->VerdictsAfter(0);
  REQUIRE(events.size() == 1);
  CHECK(events[0].verdict().reason() == "dead");
  CHECK(events[0].verdict().stall().text() ==
        "rank 1 is gone: its trainer ended on an uncaught exception in forward of step 10 on node "
        "node-a; 2 ranks wait in grad_sync of step 10");
  // Said before a release that never comes (an exit stuck in a library's teardown): gone too.
  Position(**job, 1, 10, "forward", kS, "alive", 0, "exception");
  (*job)->CheckStall(10 * kS + kS / 2);
  CHECK((*job)->VerdictsAfter(0).size() == 1);  // the same stall, unchanged
  // The same release without a reason is a rank that finished: not stalled on its account.
  Position(**job, 1, 10, "", kS, "none");
  v1::GetHealthReply health;
  (*job)->Health(&health);
  REQUIRE(health.ranks_size() == kWorld);
  CHECK(health.ranks(1).state() == "finished");
  // A reason no stub writes (the slot's bytes are the trainer's) is not taken for a raise.
  Position(**job, 1, 10, "forward", kS, "none", 0, "invalid");
  health.Clear();
  (*job)->Health(&health);
  CHECK(health.ranks(1).state() == "finished");
}

TEST_CASE("a rank that raised a collective's error is the victim of a killed peer") {
  const std::string dir = TempDir();
  auto job = JobState::Create(Decl(0), Options(dir), nullptr);
  REQUIRE(job.ok());
  Feed(**job, 0, 9);
  (*job)->CheckStall(kS);
  // Rank 0 was killed in backward of step 10; rank 1 raised Gloo's error from a broadcast in
  // forward of step 11 (a compute stage); rank 2 waits.
  Position(**job, 0, 10, "backward", kS, "dead");
  Position(**job, 1, 11, "forward", kS, "none", 0, "collective_exception");
  Position(**job, 2, 10, "grad_sync", kS);
  (*job)->CheckStall(10 * kS);
  auto events = (*job)->VerdictsAfter(0);
  REQUIRE(events.size() == 1);
  CHECK(events[0].verdict().reason() == "dead");
  CHECK(events[0].verdict().stall().text() ==
        "rank 0 is gone: its process died on node node-a; rank 1 is gone too; 1 rank waits in "
        "grad_sync of step 10");
  // Its own error instead: rank 1 is the cause (named first, where it raised).
  auto own = JobState::Create(Decl(0), Options(TempDir()), nullptr);
  REQUIRE(own.ok());
  Feed(**own, 0, 9);
  (*own)->CheckStall(kS);
  Position(**own, 0, 10, "backward", kS, "dead");
  Position(**own, 1, 11, "forward", kS, "none", 0, "exception");
  Position(**own, 2, 10, "grad_sync", kS);
  (*own)->CheckStall(10 * kS);
  events = (*own)->VerdictsAfter(0);
  REQUIRE(events.size() == 1);
  CHECK(events[0].verdict().stall().text().rfind(
            "rank 1 is gone: its trainer ended on an uncaught exception in forward of step 11",
            0) == 0);
}

TEST_CASE("a dead rank, and a stall limit of the job's own") {
  const std::string dir = TempDir();
  auto job = JobState::Create(Decl(0), Options(dir), nullptr);
  REQUIRE(job.ok());
  Feed(**job, 0, 9);
  v1::ConfigChange c;
  c.set_stall_after_ms(30'000);
  REQUIRE((*job)->ApplyConfig(c).ok());
  (*job)->CheckStall(kS);
  Position(**job, 0, 10, "forward", kS, "dead");
  Position(**job, 1, 10, "grad_sync", kS);
  Position(**job, 2, 10, "grad_sync", kS);
  (*job)->CheckStall(20 * kS);
  CHECK((*job)->VerdictsAfter(0).empty());  // under the job's 30 s
  (*job)->CheckStall(32 * kS);
  auto events = (*job)->VerdictsAfter(0);
  REQUIRE(events.size() == 1);
  CHECK(events[0].verdict().reason() == "dead");
  CHECK(events[0].verdict().stall().stall_after_ns() == 30 * kS);
  for (int64_t bad : {int64_t{-2}, int64_t{999}, int64_t{86'400'001}}) {
    c.set_stall_after_ms(bad);
    CHECK(absl::IsInvalidArgument((*job)->ApplyConfig(c)));
  }
}

TEST_CASE("after a restart: a hung job stays STALLED, an ended one raises nothing") {
  const std::string dir = TempDir();
  {
    auto job = JobState::Create(Decl(0), Options(dir), nullptr);
    REQUIRE(job.ok());
    Feed(**job, 0, 49);
    (*job)->CheckStall(kS);
    HungAt(**job, 50, kS);
    (*job)->CheckStall(10 * kS);
    REQUIRE((*job)->VerdictsAfter(0).size() == 1);
    REQUIRE((*job)->Flush().ok());
  }
  auto restore = [&] {
    JournalOpenInfo opened;
    auto r = JobState::Restore(JournalPath(dir, "hang"), Options(dir), nullptr, &opened, 5);
    REQUIRE(r.ok());
    return *std::move(r);
  };
  // Still hung: heard from again within the limit, the stall holds (no RESUMED flap).
  auto hung = restore();
  hung->CheckStall(100 * kS);
  HungAt(*hung, 50, 12 * kS);
  hung->CheckStall(101 * kS);
  CHECK(hung->VerdictsAfter(0).size() == 1);
  hung->CheckStall(106 * kS);  // past the limit: decided again, the same stall
  CHECK(hung->VerdictsAfter(0).size() == 1);
  v1::SuspectsReply s;
  REQUIRE(hung->Suspects(0, &s).ok());
  CHECK(s.verdict().label() == "STALLED");
  // Every rank finished meanwhile: the restored stall ends.
  auto ended = restore();
  ended->CheckStall(100 * kS);
  for (int r = 0; r < kWorld; ++r) Position(*ended, r, 49, "", kS, "none");
  ended->CheckStall(101 * kS);
  auto events = ended->VerdictsAfter(0);
  REQUIRE(events.size() == 2);
  CHECK(events[1].verdict().label() == "RESUMED");
  // Nobody heard from since the restart: no new alarm ("unknown"), and the old one ends after
  // the pause limit rather than outlive the job.
  auto gone = restore();
  gone->CheckStall(100 * kS);
  gone->CheckStall(200 * kS);
  CHECK(gone->VerdictsAfter(0).size() == 1);
  gone->CheckStall(100 * kS + Options(dir).stall.pause_alarm_ns + kS);
  CHECK(gone->VerdictsAfter(0).size() == 2);
}

TEST_CASE("no alarm for a restored job that ended before the restart") {
  const std::string dir = TempDir();
  {
    auto job = JobState::Create(Decl(0), Options(dir), nullptr);
    REQUIRE(job.ok());
    Feed(**job, 0, 9);
  }
  JournalOpenInfo opened;
  auto job = JobState::Restore(JournalPath(dir, "hang"), Options(dir), nullptr, &opened, 5);
  REQUIRE(job.ok());
  (*job)->CheckStall(kS);
  (*job)->CheckStall(600 * kS);
  CHECK((*job)->VerdictsAfter(0).empty());
}

TEST_CASE("a superseded run's stall ends, its gauge back to 0") {
  const std::string dir = TempDir();
  CoordinatorMetrics metrics;
  auto job = JobState::Create(Decl(0), Options(dir), &metrics);
  REQUIRE(job.ok());
  Feed(**job, 0, 9);
  (*job)->CheckStall(kS);
  HungAt(**job, 10, kS);
  (*job)->CheckStall(10 * kS);
  REQUIRE((*job)->VerdictsAfter(0).size() == 1);
  (*job)->MarkSuperseded();
  (*job)->CheckStall(11 * kS);
  auto events = (*job)->VerdictsAfter(0);
  REQUIRE(events.size() == 2);
  CHECK(events[1].verdict().label() == "RESUMED");
  CHECK(events[1].verdict().stall().text().find("started a new run") != std::string::npos);
  v1::JobInfo info;
  (*job)->Info(&info);
  CHECK_FALSE(info.has_stall());
}

// Rank 0 in forward of step 10, ranks 1 and 2 waiting in grad_sync, reported by `stream` now
// (the health's time is the coordinator's clock: the checks below are relative to it).
int64_t HungNow(JobState& job, uint64_t stream) {
  Position(job, 0, 10, "forward", kS, "alive", stream);
  Position(job, 1, 10, "grad_sync", kS, "alive", stream);
  Position(job, 2, 10, "grad_sync", kS, "alive", stream);
  return shm::MonotonicNowNs();
}

std::string ReasonAt(JobState& job, int64_t now_ns) {
  job.CheckStall(now_ns);
  const std::vector<v1::VerdictEvent> events = job.VerdictsAfter(0);
  return events.empty() ? "" : events.back().verdict().reason();
}

TEST_CASE("a sidecar's steps keep its ranks' positions alive; silence makes them lost") {
  // Batches 4 s apart while the ranks step, no health between them: steps are the sidecar's
  // sign of life, the positions stay those of the last health.
  const std::string dir = TempDir();
  auto job = JobState::Create(Decl(0), Options(dir), nullptr);
  REQUIRE(job.ok());
  Feed(**job, 0, 9);
  const int64_t t = HungNow(**job, 7);
  (*job)->CheckStall(t);  // the frontier, step 9, seen now
  // A batch that re-sends step 9 of every rank (duplicates: the frontier stays) at `at`.
  const auto resend = [&](int64_t at) {
    for (int r = 0; r < kWorld; ++r) {
      wire::PackedStepsEncoder enc(3);
      const int64_t d[3] = {1'000'000, 6'000'000, 3'000'000};
      enc.Add(9, d, 0);
      REQUIRE((*job)->Ingest(wire::MakeRankSteps("hang", r, enc), "node-a", at, 7).ok());
    }
  };
  resend(t + kS);
  CHECK(ReasonAt(**job, t + 5 * kS) == "hung");          // 4 s after the batch: alive
  CHECK(ReasonAt(**job, t + 6 * kS) == "sidecar_lost");  // 5 s after it: lost
  resend(t + 6'500'000'000);                             // heard from again: stuck, not lost
  CHECK(ReasonAt(**job, t + 7 * kS) == "hung");
}

TEST_CASE("the end of the stream that last reported a rank makes it lost at once") {
  const std::string dir = TempDir();
  auto job = JobState::Create(Decl(0), Options(dir), nullptr);
  REQUIRE(job.ok());
  Feed(**job, 0, 9);
  const int64_t t = HungNow(**job, 7);
  (*job)->CheckStall(t - 3 * kS);
  CHECK(ReasonAt(**job, t) == "hung");
  // Another stream's end (an older connection of the same sidecar) changes nothing.
  for (int r = 0; r < kWorld; ++r) (*job)->SidecarStreamEnded(r, 6);
  CHECK(ReasonAt(**job, t + kS / 10) == "hung");
  // Stream 7 ends (the sidecar was killed): lost now, not 3 s from now.
  for (int r = 0; r < kWorld; ++r) (*job)->SidecarStreamEnded(r, 7);
  CHECK(ReasonAt(**job, t + kS / 5) == "sidecar_lost");
  // Its successor reports the ranks: where they are counts again.
  HungNow(**job, 8);
  CHECK(ReasonAt(**job, shm::MonotonicNowNs()) == "hung");
}

// Sidecars hold up to 8 steps per message (batch_hold.h): between batches a job seems not to
// advance for seconds. With held_ns set (the coordinator's step deadline), that is no stall
// until a rank shows one forming; a real one is decided at the job's own limit.
JobOptions HeldOptions(const std::string& dir) {
  JobOptions o = Options(dir);  // floor 2 s
  o.stall.held_ns = 10 * kS;
  return o;
}

TEST_CASE("held batches: a job quiet between batches is not stalled before held_ns") {
  const std::string dir = TempDir();
  auto job = JobState::Create(Decl(0), HeldOptions(dir), nullptr);
  REQUIRE(job.ok());
  Feed(**job, 0, 9);
  // One report of a healthy hiccup (a stage open 1.1 s, its sidecar sent what it held), the
  // others between steps; then nothing but silence while the sidecars hold steps 10-17.
  Position(**job, 0, 10, "forward", 1'100'000'000);
  Position(**job, 1, 10, "data", 100'000'000);
  Position(**job, 2, 10, "data", 100'000'000);
  const int64_t t = shm::MonotonicNowNs();
  (*job)->CheckStall(t);                       // the frontier, step 9, seen now
  CHECK(ReasonAt(**job, t + 3 * kS).empty());  // past the 2 s floor (decided without held_ns)
  CHECK(ReasonAt(**job, t + 8 * kS).empty());
  // Past held_ns no hold explains it: decided from where the ranks were last seen.
  CHECK_FALSE(ReasonAt(**job, t + 10 * kS + kS / 10).empty());
  auto events = (*job)->VerdictsAfter(0);
  REQUIRE(events.size() == 1);
  CHECK(events[0].verdict().stall().stall_after_ns() == 10 * kS);
}

// A job with held_ns whose steps 0-9 came; its frontier seen at the returned time.
int64_t HeldJobAt(const std::string& dir, std::unique_ptr<JobState>* out) {
  auto job = JobState::Create(Decl(0), HeldOptions(dir), nullptr);
  REQUIRE(job.ok());
  *out = *std::move(job);
  Feed(**out, 0, 9);
  const int64_t t = shm::MonotonicNowNs();
  (*out)->CheckStall(t);
  return t;
}

TEST_CASE("held batches: a stall forming is decided at the job's limit, not held_ns") {
  std::unique_ptr<JobState> job;
  const int64_t t = HeldJobAt(TempDir(), &job);
  // Rank 0 stuck in forward since the frontier's last advance, its peers waiting; their
  // sidecars report every second (the last report 2.2 s before the check, at most).
  HungAt(*job, 10, 3 * kS);
  CHECK(ReasonAt(*job, t + 2'200'000'000) == "hung");
  auto events = job->VerdictsAfter(0);
  REQUIRE(events.size() == 1);
  CHECK(events[0].verdict().stall().stall_after_ns() == 2 * kS);
}

TEST_CASE("held batches: a report gone stale no longer shows a stall forming") {
  std::unique_ptr<JobState> job;
  const int64_t t = HeldJobAt(TempDir(), &job);
  HungAt(*job, 10, 3 * kS);
  // 3 s without a report: the ranks may have moved on while their sidecars hold the steps.
  CHECK(ReasonAt(*job, t + 3 * kS).empty());
  // A dead rank's process is a sign by itself.
  Position(*job, 0, 10, "forward", 4 * kS, "dead");
  CHECK(ReasonAt(*job, shm::MonotonicNowNs() + 3 * kS) == "dead");
}

}  // namespace
}  // namespace stagefrontier
