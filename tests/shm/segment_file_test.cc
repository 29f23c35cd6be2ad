// Creating, attaching to and refusing segment files: permissions, groups, and every kind of
// damaged or foreign file, each with a message that says what is wrong.
#include "shm/segment_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "tests/shm/test_support.h"

namespace stagefrontier::shm {
namespace {

using stagefrontier::testing::MakeTempDir;
using stagefrontier::testing::ReadFile;
using stagefrontier::testing::WriteFile;

SegmentOptions Options(const std::string& dir, const std::string& job, uint32_t slots = 2,
                       uint32_t capacity = 8) {
  SegmentOptions o;
  o.dir = dir;
  o.job_id = job;
  o.slot_count = slots;
  o.ring_capacity = capacity;
  return o;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST_CASE("the first process creates the segment with mode 0600; later ones attach") {
  const std::string dir = MakeTempDir();
  const mode_t old = umask(0);  // the umask must not widen the permissions
  auto a = MappedSegment::OpenOrCreate(Options(dir, "job1", 3, 16));
  umask(old);
  REQUIRE(a.ok());
  CHECK((*a)->created());
  CHECK((*a)->path() == dir + "/stagefrontier.job1.seg");
  struct stat st {};
  REQUIRE(stat((*a)->path().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(static_cast<uint64_t>(st.st_size) ==
        v2::SegmentBytes(3, 16, v2::kDefaultProbeRingCapacity));
  CHECK((*a)->view().job_id() == "job1");
  CHECK((*a)->view().header().creator_pid == static_cast<uint32_t>(getpid()));

  // A later process asking for another geometry gets the existing one.
  auto b = MappedSegment::OpenOrCreate(Options(dir, "job1", 8, 1024));
  REQUIRE(b.ok());
  CHECK_FALSE((*b)->created());
  CHECK((*b)->view().slot_count() == 3);
  CHECK((*b)->view().ring_capacity() == 16);
  // Both map the same bytes.
  (*a)->view().slot(1).rank = 77;
  CHECK((*b)->view().slot(1).rank == 77);
}

TEST_CASE("a configured group gets the segment with mode 0660") {
  const std::string dir = MakeTempDir();
  SegmentOptions o = Options(dir, "grp");
  o.group = "root";
  auto seg = MappedSegment::OpenOrCreate(o);
  REQUIRE(seg.ok());
  struct stat st {};
  REQUIRE(stat((*seg)->path().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);
  CHECK(st.st_gid == 0);

  // A numeric gid needs no name (containers sharing a segment by gid).
  o.job_id = "grp-numeric";
  o.group = std::to_string(getgid());
  auto numeric = MappedSegment::OpenOrCreate(o);
  REQUIRE(numeric.ok());
  REQUIRE(stat((*numeric)->path().c_str(), &st) == 0);
  CHECK(st.st_gid == getgid());
  CHECK((st.st_mode & 0777) == 0660);

  o.job_id = "grp2";
  o.group = "no-such-group-here";
  auto bad = MappedSegment::OpenOrCreate(o);
  REQUIRE_FALSE(bad.ok());
  CHECK(absl::IsInvalidArgument(bad.status()));
  CHECK(Message(bad.status()) == "unknown group \"no-such-group-here\" for the segment");
}

TEST_CASE("bad options are refused before touching the file system") {
  const std::string dir = MakeTempDir();
  auto s = MappedSegment::OpenOrCreate(Options(dir, "a/b"));
  CHECK(absl::IsInvalidArgument(s.status()));
  CHECK(Message(s.status()).find("characters from [A-Za-z0-9_.-]") != std::string::npos);
  s = MappedSegment::OpenOrCreate(Options(dir, ".hidden"));  // the coordinator refuses it too
  CHECK(absl::IsInvalidArgument(s.status()));
  s = MappedSegment::OpenOrCreate(Options(dir, "ok", 2, 3));
  CHECK(Message(s.status()) == "ring capacity 3 must be a power of two in 2..1048576");
  s = MappedSegment::OpenOrCreate(Options(dir, "ok", 0, 8));
  CHECK(Message(s.status()) == "slot count 0 is outside 1..1024");
  s = MappedSegment::OpenOrCreate(Options(dir + "/missing", "ok"));
  CHECK(absl::IsNotFound(s.status()));
  CHECK(Message(s.status()).find(dir + "/missing/stagefrontier.ok.seg") != std::string::npos);
  s = MappedSegment::Attach(dir + "/nothing.seg");
  CHECK(absl::IsNotFound(s.status()));
}

// Writes a valid segment for `job`, lets `damage` change its bytes, and attaches again.
absl::Status AttachDamaged(const std::string& dir, const std::string& job,
                           const std::function<void(std::string&)>& damage) {
  {
    auto seg = MappedSegment::OpenOrCreate(Options(dir, job));
    REQUIRE(seg.ok());
  }
  const std::string path = SegmentPath(dir, job);
  std::string bytes = ReadFile(path);
  damage(bytes);
  WriteFile(path, bytes);
  auto again = MappedSegment::OpenOrCreate(Options(dir, job));
  REQUIRE_FALSE(again.ok());
  return again.status();
}

TEST_CASE("damaged and foreign segment files are refused with a clear message") {
  const std::string dir = MakeTempDir();
  SECTION("zero-filled") {
    absl::Status s = AttachDamaged(dir, "zero", [](std::string& b) { b.assign(b.size(), '\0'); });
    CHECK(absl::IsDataLoss(s));
    CHECK(Message(s).find("not a StageFrontier segment: magic 0x0000000000000000 (zero-filled") !=
          std::string::npos);
  }
  SECTION("truncated inside the slots") {
    absl::Status s = AttachDamaged(dir, "trunc", [](std::string& b) { b.resize(5000); });
    CHECK(absl::IsDataLoss(s));
    CHECK(Message(s).find("is 5000 bytes but its header says") != std::string::npos);
    CHECK(Message(s).find(": truncated") != std::string::npos);
  }
  SECTION("truncated inside the header") {
    absl::Status s = AttachDamaged(dir, "short", [](std::string& b) { b.resize(100); });
    CHECK(Message(s).find("shorter than its 4096-byte header: truncated") != std::string::npos);
  }
  SECTION("empty") {
    absl::Status s = AttachDamaged(dir, "empty", [](std::string& b) { b.clear(); });
    CHECK(Message(s).find("is empty (0 bytes): truncated") != std::string::npos);
  }
  SECTION("a newer layout version") {
    absl::Status s = AttachDamaged(dir, "v3", [](std::string& b) { b[8] = 3; });
    CHECK(absl::IsFailedPrecondition(s));
    CHECK(Message(s).find("segment layout version 3 is newer than the versions this build "
                          "knows (1..2)") != std::string::npos);
  }
  SECTION("initialization never completed") {
    absl::Status s = AttachDamaged(dir, "noinit", [](std::string& b) { b[60] = 0; });
    CHECK(absl::IsFailedPrecondition(s));
    CHECK(Message(s).find("initialization is not complete") != std::string::npos);
  }
  SECTION("inconsistent geometry") {
    absl::Status s = AttachDamaged(dir, "geom", [](std::string& b) { b[48] = 7; });
    CHECK(absl::IsDataLoss(s));
    CHECK(Message(s).find("ring capacity 7 must be a power of two") != std::string::npos);
  }
  SECTION("some other file") {
    absl::Status s = AttachDamaged(dir, "other", [](std::string& b) { b = "hello world\n"; });
    CHECK(Message(s).find("not a StageFrontier segment") != std::string::npos);
  }
  SECTION("longer than its header says") {
    // Regression: the whole file was mapped and guarded, so its writer chose how much a
    // truncation made the sidecar remap (a terabyte killed it).
    absl::Status s = AttachDamaged(dir, "long", [](std::string& b) { b.resize(b.size() + 4096); });
    CHECK(absl::IsDataLoss(s));
    CHECK(Message(s).find("its header says") != std::string::npos);
    CHECK(Message(s).find("not a segment's size") != std::string::npos);
  }
}

TEST_CASE("a segment no SIGBUS guard is left for is refused, not mapped unguarded") {
  // Regression: past 256 mapped segments the guard table was full and the next segment was
  // mapped unguarded: its writer truncating it killed the sidecar.
  const std::string dir = MakeTempDir();
  REQUIRE(MappedSegment::OpenOrCreate(Options(dir, "g")).ok());
  static char taken[kMaxGuardedRanges][64];
  std::vector<MappingGuard> fill;
  for (int i = 0; i < kMaxGuardedRanges; ++i) {
    MappingGuard g = MappingGuard::Watch(taken[i], sizeof(taken[i]));
    if (!g.guarded()) break;
    fill.push_back(std::move(g));
  }
  auto seg = MappedSegment::Attach(SegmentPath(dir, "g"));
  REQUIRE_FALSE(seg.ok());
  CHECK(absl::IsResourceExhausted(seg.status()));
  CHECK(Message(seg.status()).find("no SIGBUS guard left") != std::string::npos);
  CHECK(MappedSegment::Attach(SegmentPath(dir, "g"), /*guard_sigbus=*/false).ok());
  fill.clear();  // released
  CHECK(MappedSegment::Attach(SegmentPath(dir, "g")).ok());
}

}  // namespace
}  // namespace stagefrontier::shm
