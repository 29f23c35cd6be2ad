// Real processes writing real shared memory: exact counts when the reader keeps up, drops
// equal to gaps when it does not, a writer killed mid-record, and every start order.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "shm/segment_file.h"
#include "shm/segment_reader.h"
#include "tests/shm/test_support.h"

namespace stagefrontier::shm {
namespace {

using stagefrontier::testing::MakeTempDir;
using stagefrontier::testing::ReadFile;
using stagefrontier::testing::RunfilePath;
using stagefrontier::testing::Spawn;
using stagefrontier::testing::WaitFor;

const std::string kWriter = RunfilePath("tests/shm/shm_writer_process");

pid_t StartWriter(const std::string& dir, const std::string& job, int local_rank, int steps,
                  std::vector<std::string> flags = {}) {
  std::vector<std::string> argv = {kWriter, dir, job, std::to_string(local_rank),
                                   std::to_string(steps)};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return Spawn(argv, dir + "/out" + std::to_string(local_rank));
}

// Per-slot record checker: steps strictly increase and every record carries exactly what the
// writer put in it.
struct Collected {
  std::map<uint32_t, std::vector<int64_t>> steps;
  uint64_t bad_content = 0;
  void operator()(const DrainedStep& s) {
    steps[s.local_rank].push_back(s.step);
    for (size_t k = 0; k < s.boundaries_ns.size(); ++k) {
      if (s.boundaries_ns[k] != 1'000'000 + s.step * 1000 + static_cast<int64_t>(k) * 10) {
        ++bad_content;
      }
    }
  }
};

absl::StatusOr<std::unique_ptr<MappedSegment>> AttachWhenThere(const std::string& path) {
  for (int i = 0; i < 2000; ++i) {
    auto seg = MappedSegment::Attach(path);
    if (seg.ok() || !absl::IsNotFound(seg.status())) return seg;
    usleep(1000);
  }
  return MappedSegment::Attach(path);
}

TEST_CASE("a reader that keeps up loses nothing: exact counts from 4 processes") {
  const std::string dir = MakeTempDir();
  SegmentOptions o{
      .dir = dir, .job_id = "keepup", .slot_count = 4, .ring_capacity = 4096, .group = ""};
  auto seg = MappedSegment::OpenOrCreate(o);  // the sidecar starts first here
  REQUIRE(seg.ok());
  REQUIRE((*seg)->created());
  REQUIRE((*seg)->LockForReading().ok());
  constexpr int kSteps = 5000;
  std::vector<pid_t> pids;
  for (int r = 0; r < 4; ++r) {
    pids.push_back(StartWriter(dir, "keepup", r, kSteps, {"--pace-us", "5"}));
  }
  SegmentReader reader((*seg)->view());
  Collected got;
  int exited = 0;
  while (exited < 4) {
    reader.Drain(std::ref(got));
    for (pid_t& p : pids) {
      int status = 0;
      if (p > 0 && waitpid(p, &status, WNOHANG) == p) {
        REQUIRE(WIFEXITED(status));
        REQUIRE(WEXITSTATUS(status) == 0);
        p = 0;
        ++exited;
      }
    }
    usleep(200);
  }
  reader.Drain(std::ref(got));
  CHECK(got.bad_content == 0);
  for (uint32_t r = 0; r < 4; ++r) {
    const SlotReport rep = reader.Report(r);
    INFO("local rank " << r << ": " << rep.last_error);
    CHECK(rep.records_read == kSteps);
    CHECK(rep.dropped_by_writer == 0);
    CHECK(rep.gap_steps == 0);
    CHECK(rep.torn == 0);
    CHECK(rep.invalid == 0);
    CHECK(rep.pending == 0);
    CHECK(rep.state == v1::kSlotReleased);
    REQUIRE(got.steps[r].size() == kSteps);
    int64_t sum = 0;
    for (int64_t s : got.steps[r]) sum += s;
    CHECK(sum == int64_t{kSteps} * (kSteps - 1) / 2);
    CHECK(ReadFile(dir + "/out" + std::to_string(r)).find("created 0 published 5000 dropped 0") !=
          std::string::npos);
  }
}

TEST_CASE("a reader that falls behind: the writers' drops equal the reader's gaps") {
  const std::string dir = MakeTempDir();
  constexpr int kSteps = 5000;
  std::vector<pid_t> pids;
  // Trainers start first here: the first of them creates the segment.
  for (int r = 0; r < 3; ++r) {
    pids.push_back(StartWriter(dir, "behind", r, kSteps,
                               {"--capacity", "16", "--slots", "3", "--final-wait"}));
  }
  auto seg = AttachWhenThere(SegmentPath(dir, "behind"));
  REQUIRE(seg.ok());
  SegmentReader reader((*seg)->view());
  Collected got;
  int exited = 0;
  while (exited < 3) {
    reader.Drain(std::ref(got), /*max_per_slot=*/4);
    for (pid_t& p : pids) {
      int status = 0;
      if (p > 0 && waitpid(p, &status, WNOHANG) == p) {
        REQUIRE(WIFEXITED(status));
        REQUIRE(WEXITSTATUS(status) == 0);
        p = 0;
        ++exited;
      }
    }
    usleep(1000);
  }
  reader.Drain(std::ref(got));
  CHECK(got.bad_content == 0);
  for (uint32_t r = 0; r < 3; ++r) {
    const SlotReport rep = reader.Report(r);
    INFO("local rank " << r);
    CHECK(rep.dropped_by_writer > 0);
    CHECK(rep.gap_steps == rep.dropped_by_writer);
    CHECK(rep.records_read + rep.dropped_by_writer == kSteps + 1);
    CHECK(rep.torn == 0);
    CHECK(rep.invalid == 0);
    CHECK(got.steps[r].back() == kSteps);
  }
}

TEST_CASE("a writer SIGKILLed mid-record: the torn record is counted, the slot reclaimed") {
  const std::string dir = MakeTempDir();
  pid_t pid = StartWriter(dir, "crash", 0, 100, {"--capacity", "64", "--crash-at", "10"});
  const int status = WaitFor(pid);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);

  auto seg = MappedSegment::Attach(SegmentPath(dir, "crash"));
  REQUIRE(seg.ok());
  std::vector<std::string> errors;
  ReaderOptions ro;
  ro.on_error = [&](uint32_t, const std::string& m) { errors.push_back(m); };
  SegmentReader reader((*seg)->view(), ro);
  Collected got;
  reader.Drain(std::ref(got));
  SlotReport rep = reader.Report(0);
  CHECK(rep.records_read == 10);
  CHECK(rep.owner == OwnerHealth::kDead);  // a stale owner, reported as such
  CHECK(rep.state == v1::kSlotActive);

  // The next process for local rank 0 takes the slot over and restarts its steps at 0.
  pid = StartWriter(dir, "crash", 0, 5);
  const int status2 = WaitFor(pid);
  REQUIRE(WIFEXITED(status2));
  REQUIRE(WEXITSTATUS(status2) == 0);
  reader.Drain(std::ref(got));
  rep = reader.Report(0);
  CHECK(rep.torn == 1);
  CHECK(rep.records_read == 15);
  CHECK(rep.invalid == 0);
  CHECK(rep.generation == 2);
  CHECK(rep.owner == OwnerHealth::kNone);
  CHECK(got.bad_content == 0);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0] == "local rank 0: record 10 is torn (its writer died while writing it)");
}

TEST_CASE("processes racing to create one segment all end up in the same one") {
  for (int round = 0; round < 5; ++round) {
    const std::string dir = MakeTempDir();
    std::vector<pid_t> pids;
    for (int r = 0; r < 8; ++r) pids.push_back(StartWriter(dir, "race", r, 3, {"--slots", "8"}));
    int created = 0;
    for (int r = 0; r < 8; ++r) {
      const int status = WaitFor(pids[r]);
      REQUIRE(WIFEXITED(status));
      REQUIRE(WEXITSTATUS(status) == 0);
      const std::string out = ReadFile(dir + "/out" + std::to_string(r));
      created += out.find("created 1") != std::string::npos ? 1 : 0;
    }
    CHECK(created == 1);
    auto seg = MappedSegment::Attach(SegmentPath(dir, "race"));
    REQUIRE(seg.ok());
    SegmentReader reader((*seg)->view());
    Collected got;
    CHECK(reader.Drain(std::ref(got)) == 24);
    // Only the published segment is there: the losers removed their temporary files.
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("out", 0) != 0) names.push_back(name);
    }
    CHECK(names == std::vector<std::string>{"stagefrontier.race.seg"});
  }
}

TEST_CASE("a second reader is refused while the first holds the segment") {
  const std::string dir = MakeTempDir();
  SegmentOptions o{
      .dir = dir, .job_id = "tworeaders", .slot_count = 1, .ring_capacity = 4, .group = ""};
  auto a = MappedSegment::OpenOrCreate(o);
  REQUIRE(a.ok());
  REQUIRE((*a)->LockForReading().ok());
  // flock locks belong to the open file description: a second process gets refused.
  const pid_t pid = fork();
  if (pid == 0) {
    auto b = MappedSegment::Attach(SegmentPath(dir, "tworeaders"));
    const absl::Status s = b.ok() ? (*b)->LockForReading() : b.status();
    _exit(absl::IsResourceExhausted(s) && s.message().find("another reader") != std::string::npos
              ? 0
              : 1);
  }
  const int status = WaitFor(pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace stagefrontier::shm
