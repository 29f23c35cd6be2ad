// The job registry: jobs declare themselves (or only allowlisted ones), a restart restores
// every journal in the data directory, and damaged journals keep every intact record.
#include "daemon/coordinator/job_registry.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "shm/monotonic_clock.h"

namespace stagefrontier {
namespace {

v1::RankDeclaration Decl(const std::string& job, int rank, int world = 4) {
  v1::RankDeclaration d;
  d.set_job(job);
  d.set_rank(rank);
  d.set_world_size(world);
  for (const char* n : {"data", "grad_sync"}) {
    v1::Stage* s = d.add_stages();
    s->set_name(n);
    s->set_kind(std::string(n) == "data" ? v1::STAGE_KIND_IO : v1::STAGE_KIND_SYNC);
  }
  return d;
}

std::string TempDir() {
  char dir[] = "/tmp/sf_registry_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  return dir;
}

JobOptions Options(const std::string& dir) {
  JobOptions o;
  o.data_dir = dir;
  o.fsync = false;
  return o;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Steps 0..n-1 of ranks 0..3 through the real ingest path, each closed.
void Feed(JobState& job, int n) {
  for (int step = 0; step < n; ++step) {
    for (int rank = 0; rank < 4; ++rank) {
      v1::RankSteps rs;
      rs.set_job(job.name());
      rs.set_rank(rank);
      rs.set_base_step(step);
      rs.set_count(1);
      // zigzag delta 0, durations 1000 and 2000 ns (varints), flags 0.
      rs.set_packed(std::string("\x00\xe8\x07\xd0\x0f\x00", 6));
      REQUIRE(job.Ingest(rs, "n", 1).ok());
    }
    job.CloseDue(1);
  }
  REQUIRE(job.Flush().ok());
}

int64_t Accounted(const JobState& job) {
  v1::JobInfo info;
  job.Info(&info);
  return info.steps_accounted();
}

// Job "j" of 4 ranks declared and fed `steps` closed steps, its registry then gone.
void WriteJob(const JobOptions& o, int steps) {
  JobRegistry jobs(o, nullptr, {});
  auto job = jobs.Declare(Decl("j", 0));
  REQUIRE(job.ok());
  if (steps > 0) Feed(**job, steps);
}

// After another restart job "j" comes back from its journal alone, `steps` accounted.
void ExpectRestored(const JobOptions& o, int64_t steps) {
  JobRegistry again(o, nullptr, {});
  CHECK(again.RestoreAll().ok());
  REQUIRE(again.Find("j") != nullptr);
  CHECK(Accounted(*again.Find("j")) == steps);
}

TEST_CASE("jobs declared, found, and restored after a restart (regression: restore crashed)") {
  const std::string dir = TempDir();
  JobOptions o = Options(dir);
  {
    JobRegistry jobs(o, nullptr, {});
    REQUIRE(jobs.RestoreAll().ok());
    REQUIRE(jobs.Declare(Decl("a", 0)).ok());
    REQUIRE(jobs.Declare(Decl("b", 3)).ok());
    REQUIRE(jobs.Declare(Decl("a", 1)).ok());
    CHECK(jobs.All().size() == 2);
  }
  // A file that is not a journal is reported and moved aside as it was; the others restore.
  const std::string broken = dir + "/broken.journal";
  std::ofstream(broken) << "not a journal";
  std::vector<std::string> lines;
  JobRegistry again(o, nullptr, {}, [&](const std::string& l) { lines.push_back(l); });
  absl::Status s = again.RestoreAll();
  CHECK(!s.ok());
  CHECK_THAT(std::string(s.message()), Catch::Contains("broken.journal"));
  CHECK_THAT(std::string(s.message()), Catch::Contains("not a StageFrontier journal"));
  // Regression: recovery truncated a non-journal *.journal file. Its bytes are kept.
  const std::string marker = "moved aside to ";
  const std::string msg(s.message());
  REQUIRE(msg.find(marker) != std::string::npos);
  const std::string aside = msg.substr(msg.find(marker) + marker.size(),
                                       msg.find(" (kept)") - msg.find(marker) - marker.size());
  CHECK(ReadAll(aside) == "not a journal");
  REQUIRE(again.Find("a") != nullptr);
  REQUIRE(again.Find("b") != nullptr);
  CHECK(again.Find("a")->world_size() == 4);
  CHECK(again.Find("c") == nullptr);
  CHECK(lines.size() == 3);
}

TEST_CASE("an allowlist refuses other jobs with NOT_FOUND") {
  JobRegistry jobs(Options(TempDir()), nullptr, {"only"});
  CHECK(jobs.Declare(Decl("only", 0)).ok());
  auto other = jobs.Declare(Decl("other", 0));
  REQUIRE(!other.ok());
  CHECK(other.status().code() == absl::StatusCode::kNotFound);
  auto mismatch = jobs.Declare(Decl("only", 9));
  CHECK(mismatch.status().code() == absl::StatusCode::kOutOfRange);
}

// Regression (hostile input): recovery followed a symbolic link out of the data directory.
TEST_CASE("a journal that is a symbolic link is never followed") {
  const std::string dir = TempDir();
  const std::string outside = TempDir() + "/victim";
  std::ofstream(outside) << "precious bytes outside the data directory";
  REQUIRE(symlink(outside.c_str(), (dir + "/evil.journal").c_str()) == 0);
  std::vector<std::string> lines;
  JobRegistry jobs(Options(dir), nullptr, {}, [&](const std::string& l) { lines.push_back(l); });
  CHECK(!jobs.RestoreAll().ok());
  CHECK(ReadAll(outside) == "precious bytes outside the data directory");
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::Contains("symbolic link"));
}

// Regression (hostile input): one flipped bit in the first record emptied the journal, and
// the job's ranks were refused for good. Now the file is kept, and the intact records come
// back in the job as soon as a rank declares it again.
TEST_CASE("a journal whose declaration is damaged is salvaged at the next declaration") {
  const std::string dir = TempDir();
  JobOptions o = Options(dir);
  {
    JobRegistry jobs(o, nullptr, {});
    auto job = jobs.Declare(Decl("j", 0));
    REQUIRE(job.ok());
    Feed(**job, 20);
    CHECK(Accounted(**job) == 20);
  }
  const std::string path = dir + "/j.journal";
  std::string bytes = ReadAll(path);
  const std::string before = bytes;
  bytes[kJournalHeaderBytes + kJournalRecordHeaderBytes + 3] ^= 0x10;  // inside JobDeclared
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;

  std::vector<std::string> lines;
  JobRegistry jobs(o, nullptr, {}, [&](const std::string& l) { lines.push_back(l); });
  CHECK(jobs.RestoreAll().ok());
  CHECK(jobs.Find("j") == nullptr);
  CHECK(jobs.PendingSalvage() == std::vector<std::string>{"j"});
  CHECK(ReadAll(path) == bytes);  // untouched until then
  auto job = jobs.Declare(Decl("j", 2));
  REQUIRE(job.ok());
  CHECK(Accounted(**job) == 20);  // every intact record is back in the job
  CHECK(jobs.PendingSalvage().empty());
  bool kept = false;
  for (const std::string& l : lines) {
    if (l.find("salvaged job j") != std::string::npos) {
      kept = true;
      const size_t at = l.find("the original is kept at ");
      REQUIRE(at != std::string::npos);
      CHECK(ReadAll(l.substr(at + 24)) == bytes);  // the damaged file, byte for byte
    }
  }
  CHECK(kept);
  // And the rebuilt journal restores on its own after another restart.
  ExpectRestored(o, 20);
}

// Regression (issue 28, attack 8): a journal with no intact record (here: a job that died
// while its declaration was being written) refused its job id at every restart.
TEST_CASE("a journal with no intact record is moved aside and its job starts anew") {
  const std::string dir = TempDir();
  JobOptions o = Options(dir);
  WriteJob(o, 0);
  const std::string path = dir + "/j.journal";
  std::string bytes = ReadAll(path);
  bytes.resize(bytes.size() - 3);  // the declaration torn
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  std::vector<std::string> lines;
  JobRegistry jobs(o, nullptr, {}, [&](const std::string& l) { lines.push_back(l); });
  const absl::Status s = jobs.RestoreAll();
  CHECK(absl::IsDataLoss(s));
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("no intact record") &&
                 Catch::Contains("moved aside to " + path + ".unreadable-") &&
                 Catch::Contains("job j starts a new journal"));
  struct stat st {};
  CHECK(::lstat(path.c_str(), &st) != 0);  // gone from its name
  auto job = jobs.Declare(Decl("j", 1));
  REQUIRE(job.ok());
  Feed(**job, 3);
  CHECK(Accounted(**job) == 3);
  // And the new journal restores after another restart.
  ExpectRestored(o, 3);
}

// Regression (issue 28, attack 8): one bad byte in the 8-byte magic discarded every intact
// record behind it and refused the job id.
TEST_CASE("a journal whose file header is damaged keeps every record behind it") {
  const std::string dir = TempDir();
  JobOptions o = Options(dir);
  WriteJob(o, 20);
  const std::string path = dir + "/j.journal";
  std::string bytes = ReadAll(path);
  bytes[2] ^= 0x01;  // "SFJOURNL" -> "SFKOURNL"
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  std::vector<std::string> lines;
  JobRegistry jobs(o, nullptr, {}, [&](const std::string& l) { lines.push_back(l); });
  CHECK(jobs.RestoreAll().ok());
  REQUIRE(jobs.Find("j") != nullptr);
  CHECK(Accounted(*jobs.Find("j")) == 20);
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::Contains("the file header is damaged") &&
                           Catch::Contains("the original is kept at"));
  // Rewritten with a good header: the next restart reads it plainly.
  ExpectRestored(o, 20);
}

TEST_CASE("limits: world size, memory per job, number of jobs") {
  JobOptions o = Options(TempDir());
  o.limits.max_world_size = 1000;
  o.limits.max_jobs = 2;
  o.limits.max_job_memory_bytes = int64_t{64} << 20;
  MemoryBudget budget(int64_t{100} << 20);
  o.budget = &budget;
  JobRegistry jobs(o, nullptr, {});
  // Regression (hostile input): a Hello with a world size near 2^20 was accepted, and every
  // partial step then held memory in proportion to it.
  auto huge = jobs.Declare(Decl("huge", 0, 1 << 20));
  REQUIRE(absl::IsResourceExhausted(huge.status()));
  CHECK_THAT(std::string(huge.status().message()), Catch::Contains("--max-world-size"));
  auto big = jobs.Declare(Decl("big", 0, 1000));  // within the world limit, not in 64 MB
  REQUIRE(absl::IsResourceExhausted(big.status()));
  CHECK_THAT(std::string(big.status().message()), Catch::Contains("--max-job-memory-mb"));
  CHECK(budget.used() == 0);
  auto a = jobs.Declare(Decl("a", 0, 4));
  REQUIRE(a.ok());
  CHECK(budget.used() == (*a)->reserved_bytes());
  CHECK(budget.used() > 0);
  REQUIRE(jobs.Declare(Decl("b", 0, 4)).ok());
  auto c = jobs.Declare(Decl("c", 0, 4));
  REQUIRE(absl::IsResourceExhausted(c.status()));
  CHECK_THAT(std::string(c.status().message()), Catch::Contains("--max-jobs"));
  // Nothing was left behind for the refused jobs: no journal files.
  CHECK(access((o.data_dir + "/huge.journal").c_str(), F_OK) != 0);
  CHECK(access((o.data_dir + "/big.journal").c_str(), F_OK) != 0);
}

// One step of `rank` through the real ingest path (durations 1000 and 2000 ns).
absl::StatusOr<IngestCounts> Step(JobState& job, int rank, int64_t step) {
  v1::RankSteps rs;
  rs.set_job(job.id());
  rs.set_rank(rank);
  rs.set_base_step(step);
  rs.set_count(1);
  rs.set_packed(std::string("\x00\xe8\x07\xd0\x0f\x00", 6));
  return job.Ingest(rs, "n", 1);
}

// Ranks 0..3 of job "j" declared from process `owner` of node "n" (the slot's owner generation).
std::shared_ptr<JobState> DeclareAll(JobRegistry& jobs, uint64_t owner) {
  std::shared_ptr<JobState> job;
  for (int rank = 0; rank < 4; ++rank) {
    v1::RankDeclaration d = Decl("j", rank);
    d.set_owner_generation(owner);
    auto declared = jobs.Declare(d);
    REQUIRE(declared.ok());
    (*declared)->NoteOwner(d, "n");
    job = *declared;
  }
  return job;
}

TEST_CASE("a re-run from an earlier step with new processes is the job's next generation") {
  const std::string dir = TempDir();
  JobRegistry jobs(Options(dir), nullptr, {});
  std::shared_ptr<JobState> first = DeclareAll(jobs, 1);
  Feed(*first, 10);
  REQUIRE(Accounted(*first) == 10);

  // The same processes declaring again (a sidecar restart) change nothing.
  first = DeclareAll(jobs, 1);
  auto same = Step(*first, 0, 10);
  REQUIRE(same.ok());
  CHECK_FALSE(same->new_run);
  CHECK(same->accepted == 1);

  // New processes: their first step goes back, so nothing is kept and a new run is said.
  REQUIRE(DeclareAll(jobs, 2) == first);
  auto rerun = Step(*first, 0, 0);
  REQUIRE(rerun.ok());
  CHECK(rerun->new_run);
  CHECK(rerun->new_run_step == 0);
  CHECK(rerun->previous_step == 10);
  CHECK(rerun->accepted == 0);
  CHECK(rerun->duplicates == 0);

  v1::RankDeclaration d0 = Decl("j", 0);
  d0.set_owner_generation(2);
  auto second = jobs.StartGeneration(first, d0, "n", "test");
  REQUIRE(second.ok());
  CHECK((*second)->name() == "j@2");
  CHECK((*second)->id() == "j");
  CHECK((*second)->generation() == 2);
  CHECK(first->superseded());
  CHECK_FALSE((*second)->superseded());
  CHECK(jobs.Find("j") == *second);
  CHECK(jobs.Find("j@2") == *second);
  CHECK(jobs.Find("j@1") == first);
  CHECK(jobs.Find("j@3") == nullptr);
  CHECK(jobs.Find("j@x") == nullptr);
  CHECK(jobs.Find("j@02") == nullptr);
  CHECK(jobs.All().size() == 2);
  auto kept = Step(**second, 0, 0);
  REQUIRE(kept.ok());
  CHECK(kept->accepted == 1);

  // Another rank's new process, still declared on the first run: the same second generation.
  auto rerun1 = Step(*first, 1, 0);
  REQUIRE(rerun1.ok());
  CHECK(rerun1->new_run);
  v1::RankDeclaration d1 = Decl("j", 1);
  d1.set_owner_generation(2);
  auto again = jobs.StartGeneration(first, d1, "n", "test");
  REQUIRE(again.ok());
  CHECK(*again == *second);

  // The first run keeps its steps, readable; a restart restores both, the second current.
  CHECK(Accounted(*first) == 10);
  REQUIRE((*second)->Flush().ok());
  struct stat st {};
  CHECK(::stat((dir + "/j.journal").c_str(), &st) == 0);
  CHECK(::stat((dir + "/j@2.journal").c_str(), &st) == 0);
  JobRegistry restarted(Options(dir), nullptr, {});
  REQUIRE(restarted.RestoreAll().ok());
  REQUIRE(restarted.Find("j") != nullptr);
  CHECK(restarted.Find("j")->name() == "j@2");
  REQUIRE(restarted.Find("j@1") != nullptr);
  CHECK(Accounted(*restarted.Find("j@1")) == 10);
  CHECK(restarted.Find("j@1")->superseded());
  v1::JobInfo info;
  restarted.Find("j")->Info(&info);
  CHECK(info.job() == "j@2");
  CHECK(info.job_id() == "j");
  CHECK(info.generation() == 2);
  CHECK(info.current());
}

TEST_CASE("a new process that goes on from a later step is the same run") {
  const std::string dir = TempDir();
  JobRegistry jobs(Options(dir), nullptr, {});
  std::shared_ptr<JobState> job = DeclareAll(jobs, 1);
  Feed(*job, 10);
  DeclareAll(jobs, 2);  // e.g. resumed from a checkpoint ahead of what was seen
  auto c = Step(*job, 0, 12);
  REQUIRE(c.ok());
  CHECK_FALSE(c->new_run);
  CHECK(c->accepted == 1);
  CHECK(jobs.All().size() == 1);
}

TEST_CASE("a re-run is told after a coordinator restart (the processes are journaled)") {
  const std::string dir = TempDir();
  {
    JobRegistry jobs(Options(dir), nullptr, {});
    Feed(*DeclareAll(jobs, 1), 10);
  }
  JobRegistry jobs(Options(dir), nullptr, {});
  REQUIRE(jobs.RestoreAll().ok());
  std::shared_ptr<JobState> job = DeclareAll(jobs, 2);
  auto c = Step(*job, 0, 0);
  REQUIRE(c.ok());
  CHECK(c->new_run);
}

TEST_CASE("at most kGenerationsKept runs of one job stay in memory") {
  const std::string dir = TempDir();
  JobRegistry jobs(Options(dir), nullptr, {});
  std::shared_ptr<JobState> job = DeclareAll(jobs, 1);
  for (uint64_t owner = 2; owner <= JobRegistry::kGenerationsKept + 1; ++owner) {
    v1::RankDeclaration d = Decl("j", 0);
    d.set_owner_generation(owner);
    auto next = jobs.StartGeneration(job, d, "n", "test");
    REQUIRE(next.ok());
    job = *next;
  }
  CHECK(job->generation() == JobRegistry::kGenerationsKept + 1);
  CHECK(jobs.All().size() == JobRegistry::kGenerationsKept);
  CHECK(jobs.Find("j@1") == nullptr);  // left memory; its journal stays
  struct stat st {};
  CHECK(::stat((dir + "/j.journal").c_str(), &st) == 0);
  CHECK(jobs.Find("j@2") != nullptr);
}

TEST_CASE("a new run skips a number whose journal is taken, and runs are bounded") {
  const std::string dir = TempDir();
  JobRegistry jobs(Options(dir), nullptr, {});
  std::shared_ptr<JobState> job = DeclareAll(jobs, 1);
  // A journal of run 2 left on disk (it did not restore): the new run is number 3.
  { std::ofstream(dir + "/j@2.journal") << "x"; }
  v1::RankDeclaration d = Decl("j", 0);
  d.set_owner_generation(2);
  auto next = jobs.StartGeneration(job, d, "n", "test");
  REQUIRE(next.ok());
  CHECK((*next)->name() == "j@3");
  for (uint32_t g = 4; g <= JobRegistry::kMaxGenerations; ++g) {
    d.set_owner_generation(g);
    next = jobs.StartGeneration(*next, d, "n", "test");
    REQUIRE(next.ok());
  }
  d.set_owner_generation(JobRegistry::kMaxGenerations + 1);
  auto refused = jobs.StartGeneration(*next, d, "n", "test");
  CHECK(absl::IsResourceExhausted(refused.status()));
  CHECK(jobs.All().size() == JobRegistry::kGenerationsKept);
}

// Series of job `job` in the registry's /metrics.
int SeriesOf(const CoordinatorMetrics& metrics, const std::string& job) {
  int n = 0;
  for (const prometheus::MetricFamily& f : metrics.registry()->Collect()) {
    for (const prometheus::ClientMetric& m : f.metric) {
      for (const prometheus::ClientMetric::Label& l : m.label) {
        if (l.name == "training_job" && l.value == job) ++n;
      }
    }
  }
  return n;
}

// Regression: --max-jobs counted every job the coordinator ever held, so that a coordinator
// serving a cluster refused every new job once 1,024 had run, and each job's series stayed in
// /metrics for ever. Ingest with time 1 (Feed) leaves a job idle since long ago.
TEST_CASE("an idle job leaves memory when a new job needs room, and comes back from its journal") {
  const std::string dir = TempDir();
  JobOptions o = Options(dir);
  o.limits.max_jobs = 2;
  o.limits.job_retire_idle_ms = 60'000;
  CoordinatorMetrics metrics;
  struct Retired : VerdictObserver {
    void OnJobRetired(const std::string& job) override { names.push_back(job); }
    std::vector<std::string> names;
  } retired;
  o.observers.push_back(&retired);
  std::vector<std::string> log;
  JobRegistry jobs(o, &metrics, {}, [&](const std::string& line) { log.push_back(line); });
  {
    auto a = jobs.Declare(Decl("a", 0));
    REQUIRE(a.ok());
    Feed(**a, 5);  // idle since time 1
  }
  REQUIRE(jobs.Declare(Decl("b", 0)).ok());  // active: just declared
  CHECK(SeriesOf(metrics, "a") > 0);
  REQUIRE(jobs.Declare(Decl("c", 0)).ok());  // room made: "a" retired
  CHECK(jobs.Find("a") == nullptr);
  CHECK(jobs.RetiredJournal("a") == dir + "/a.journal");
  CHECK(jobs.retired_count() == 1);
  CHECK(SeriesOf(metrics, "a") == 0);                     // gone from /metrics
  CHECK(retired.names == std::vector<std::string>{"a"});  // the ledger, the captures forget it
  CHECK(SeriesOf(metrics, "b") > 0);
  REQUIRE_FALSE(log.empty());
  CHECK_THAT(log.back(), Catch::Contains("job a left memory to make room for job c"));
  // Neither b nor c is idle: "a" coming back is refused, saying why.
  auto refused = jobs.Declare(Decl("a", 1));
  REQUIRE(absl::IsResourceExhausted(refused.status()));
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("--max-jobs") && Catch::Contains("--job-retire-idle-ms"));
  Feed(*jobs.Find("c"), 2);  // c idle now
  auto back = jobs.Declare(Decl("a", 1));
  REQUIRE(back.ok());
  CHECK(Accounted(**back) == 5);  // restored from its journal
  CHECK(jobs.RetiredJournal("a").empty());
  CHECK(jobs.Find("c") == nullptr);
  CHECK(jobs.retired_count() == 2);
}

TEST_CASE("a job in use (a stream, a watch, a query) is never retired") {
  JobOptions o = Options(TempDir());
  o.limits.max_jobs = 1;
  JobRegistry jobs(o, nullptr, {});
  auto a = jobs.Declare(Decl("a", 0));
  REQUIRE(a.ok());
  Feed(**a, 3);
  std::shared_ptr<JobState> held = *a;
  a = absl::UnknownError("dropped");
  CHECK(absl::IsResourceExhausted(jobs.Declare(Decl("b", 0)).status()));
  held.reset();
  CHECK(jobs.Declare(Decl("b", 0)).ok());
  CHECK(jobs.Find("a") == nullptr);
}

TEST_CASE("a declaration that could never make a job retires none") {
  JobOptions o = Options(TempDir());
  o.limits.max_jobs = 1;
  o.limits.max_world_size = 64;
  JobRegistry jobs(o, nullptr, {});
  {
    auto a = jobs.Declare(Decl("a", 0));
    REQUIRE(a.ok());
    Feed(**a, 3);  // idle
  }
  CHECK(absl::IsResourceExhausted(jobs.Declare(Decl("big", 0, 1000)).status()));
  CHECK(absl::IsInvalidArgument(jobs.Declare(Decl("bad/id", 0)).status()));
  CHECK(jobs.Find("a") != nullptr);
  CHECK(jobs.retired_count() == 0);
}

TEST_CASE("an idle job leaves memory when a new job needs its memory") {
  int64_t one_job = 0;
  {
    JobOptions po = Options(TempDir());
    MemoryBudget plenty(int64_t{1} << 40);
    po.budget = &plenty;
    JobRegistry probe(po, nullptr, {});
    auto a = probe.Declare(Decl("a", 0));
    REQUIRE(a.ok());
    one_job = (*a)->reserved_bytes();
  }
  REQUIRE(one_job > 0);
  JobOptions o = Options(TempDir());
  MemoryBudget budget(one_job + one_job / 2);
  o.budget = &budget;
  JobRegistry jobs(o, nullptr, {});
  {
    auto a = jobs.Declare(Decl("a", 0));
    REQUIRE(a.ok());
    Feed(**a, 3);
  }
  auto b = jobs.Declare(Decl("b", 0));
  REQUIRE(b.ok());
  CHECK(jobs.Find("a") == nullptr);
  CHECK(budget.used() == one_job);
  // b is active: c finds no room and is refused as before.
  auto c = jobs.Declare(Decl("c", 0));
  REQUIRE(absl::IsResourceExhausted(c.status()));
  CHECK_THAT(std::string(c.status().message()), Catch::Contains("--max-memory-mb"));
  // Regression: a job coming back from its journal reserved its memory anyway, past the budget.
  b = absl::UnknownError("dropped");
  auto back = jobs.Declare(Decl("a", 1));
  REQUIRE(absl::IsResourceExhausted(back.status()));
  CHECK_THAT(std::string(back.status().message()), Catch::Contains("restored from"));
  CHECK(budget.used() == one_job);
  CHECK(jobs.RetiredJournal("a") != "");
  Feed(*jobs.Find("b"), 2);  // b idle: a comes back in its place
  back = jobs.Declare(Decl("a", 1));
  REQUIRE(back.ok());
  CHECK(jobs.Find("b") == nullptr);
  CHECK(budget.used() == one_job);
}

TEST_CASE("no job leaves memory for one that would not fit anyway") {
  JobOptions o = Options(TempDir());
  MemoryBudget plenty(int64_t{1} << 40);
  o.budget = &plenty;
  int64_t small = 0;
  {
    JobRegistry probe(o, nullptr, {});
    auto a = probe.Declare(Decl("a", 0));
    REQUIRE(a.ok());
    small = (*a)->reserved_bytes();
  }
  o.data_dir = TempDir();
  MemoryBudget budget(small * 3 / 2);
  o.budget = &budget;
  JobRegistry jobs(o, nullptr, {});
  {
    auto a = jobs.Declare(Decl("a", 0));
    REQUIRE(a.ok());
    Feed(**a, 3);  // idle
  }
  // 64 ranks need far more than the budget holds: refused, and a stays.
  auto big = jobs.Declare(Decl("big", 0, 64));
  REQUIRE(absl::IsResourceExhausted(big.status()));
  CHECK_THAT(std::string(big.status().message()), Catch::Contains("--max-memory-mb"));
  CHECK(jobs.Find("a") != nullptr);
  CHECK(jobs.retired_count() == 0);
}

TEST_CASE("a job whose earlier run a stream still feeds does not leave; a new process is life") {
  JobOptions o = Options(TempDir());
  o.limits.max_jobs = 1;
  JobRegistry jobs(o, nullptr, {});
  std::shared_ptr<JobState> first = DeclareAll(jobs, 1);
  v1::RankDeclaration d = Decl("j", 0);
  d.set_owner_generation(2);
  auto second = jobs.StartGeneration(first, d, "n", "test");
  REQUIRE(second.ok());
  Feed(**second, 2);
  Feed(*first, 2);  // both runs idle; a stream still holds the first
  second = absl::UnknownError("dropped");
  CHECK(absl::IsResourceExhausted(jobs.Declare(Decl("b", 0)).status()));
  first->NoteOwner(Decl("j", 1), "n");  // a new process: the run is active again
  CHECK_FALSE(first->IdleFor(shm::MonotonicNowNs(), 60'000'000'000));
  Feed(*first, 2);
  first.reset();
  CHECK(jobs.Declare(Decl("b", 0)).ok());
  CHECK(jobs.Find("j") == nullptr);
  CHECK(jobs.Find("j@2") == nullptr);
}

TEST_CASE("a restart restores the --max-jobs jobs written last; the others on a declaration") {
  const std::string dir = TempDir();
  {
    JobRegistry jobs(Options(dir), nullptr, {});
    for (const char* id : {"x", "y", "z"}) {
      auto job = jobs.Declare(Decl(id, 0));
      REQUIRE(job.ok());
      Feed(**job, 2);
    }
  }
  // x written first, then z, then y.
  int64_t sec = 1'700'000'000;
  for (const char* id : {"x", "z", "y"}) {
    const timespec times[2] = {{sec, 0}, {sec, 0}};
    REQUIRE(::utimensat(AT_FDCWD, (dir + "/" + id + ".journal").c_str(), times, 0) == 0);
    sec += 10;
  }
  JobOptions o = Options(dir);
  o.limits.max_jobs = 2;
  std::vector<std::string> log;
  JobRegistry jobs(o, nullptr, {}, [&](const std::string& line) { log.push_back(line); });
  REQUIRE(jobs.RestoreAll().ok());
  CHECK(jobs.All().size() == 2);
  CHECK(jobs.Find("x") == nullptr);
  CHECK(jobs.Find("y") != nullptr);
  CHECK(jobs.Find("z") != nullptr);
  CHECK(jobs.RetiredJournal("x") == dir + "/x.journal");
  CHECK_THAT(log.front(), Catch::Contains("restoring the 2 written last"));
  // Regression: a restored job looked active for --job-retire-idle-ms after a restart, and
  // every new job was refused meanwhile. Idle since its journal was written: z (written
  // before y) leaves for x at once.
  auto x = jobs.Declare(Decl("x", 0));
  REQUIRE(x.ok());
  CHECK(Accounted(**x) == 2);
  CHECK(jobs.Find("z") == nullptr);
  CHECK(jobs.Find("y") != nullptr);
}

}  // namespace
}  // namespace stagefrontier
