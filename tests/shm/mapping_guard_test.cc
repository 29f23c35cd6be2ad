// The SIGBUS guard: a truncated shared mapping costs the mapping, never the process; faults
// elsewhere behave as if the guard were not there.
#include "shm/mapping_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "shm/segment_file.h"
#include "tests/shm/test_support.h"

namespace stagefrontier::shm {
namespace {

using stagefrontier::testing::MakeTempDir;
using stagefrontier::testing::RunfilePath;
using stagefrontier::testing::Spawn;
using stagefrontier::testing::WaitFor;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // the sanitizer's own handler reports, then aborts
#else
constexpr bool kSanitized = false;
#endif

TEST_CASE("a truncated guarded mapping larger than memory and swap is replaced too") {
  // Regression: the replacement mapping reserved memory for the whole range, which the kernel
  // refuses past memory and swap; the handler then fell back to the default action and the
  // process died of the SIGBUS. The size is the writer's to choose: here a sparse terabyte.
  const std::string path = MakeTempDir() + "/big";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT, 0600);
  REQUIRE(fd >= 0);
  const size_t size = size_t{1} << 40;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    close(fd);
    WARN("this file system holds no sparse terabyte: case skipped");
    return;
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(p != MAP_FAILED);
  MappingGuard guard = MappingGuard::Watch(p, size);
  REQUIRE(guard.guarded());
  REQUIRE(ftruncate(fd, 0) == 0);
  volatile char* bytes = static_cast<char*>(p);
  bytes[12345] = 1;  // SIGBUS: handled by the guard, or the process dies here
  CHECK(guard.lost());
  guard.Release();
  munmap(p, size);
  close(fd);
}

TEST_CASE("a truncated guarded mapping becomes private zeros instead of killing us") {
  const std::string path = MakeTempDir() + "/f";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(ftruncate(fd, 1 << 16) == 0);
  void* p = mmap(nullptr, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(p != MAP_FAILED);
  volatile char* bytes = static_cast<char*>(p);
  bytes[10] = 7;
  MappingGuard guard = MappingGuard::Watch(p, 1 << 16);
  REQUIRE(guard.guarded());
  CHECK_FALSE(guard.lost());
  const uint64_t faults = MappingGuard::faults_handled();
  REQUIRE(ftruncate(fd, 0) == 0);
  bytes[5000] = 3;  // beyond the file's end now: SIGBUS without the guard
  CHECK(guard.lost());
  CHECK(MappingGuard::faults_handled() == faults + 1);
  CHECK(bytes[5000] == 3);  // private memory now
  CHECK(bytes[10] == 0);    // the whole range was replaced
  guard.Release();
  CHECK_FALSE(guard.lost());
  munmap(p, 1 << 16);
  close(fd);
}

TEST_CASE("faults outside guarded ranges kill as before, or reach the earlier handler") {
  const std::string dir = MakeTempDir();
  int status = WaitFor(Spawn({RunfilePath("tests/shm/mapping_guard_child"), dir, "default"}));
  CHECK_FALSE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  if (!kSanitized) {
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGBUS);
  }
  status = WaitFor(Spawn({RunfilePath("tests/shm/mapping_guard_child"), dir, "chain"}));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 42);
}

// Regression (hostile input): truncating a live segment killed the sidecar and the trainers
// with SIGBUS. The segment is lost, the process goes on, CheckIntact says what happened.
TEST_CASE("a segment truncated while in use is lost, not fatal") {
  SegmentOptions o;
  o.dir = MakeTempDir();
  o.job_id = "trunc";
  o.slot_count = 2;
  o.ring_capacity = 64;
  auto seg = MappedSegment::OpenOrCreate(o);
  REQUIRE(seg.ok());
  CHECK((*seg)->CheckIntact().ok());
  REQUIRE(truncate((*seg)->path().c_str(), 4096) == 0);  // the header page survives
  absl::Status s = (*seg)->CheckIntact();
  CHECK(absl::IsDataLoss(s));
  CHECK_THAT(std::string(s.message()), Catch::Contains("shrank"));
  (*seg)->view().slot(1).write_cursor.store(5);  // past the file's end: would be SIGBUS
  CHECK((*seg)->lost());
  CHECK_THAT(std::string((*seg)->CheckIntact().message()), Catch::Contains("truncated"));
}

TEST_CASE("segments are never opened through a symbolic link, and foreign writable ones warn") {
  const std::string dir = MakeTempDir();
  SegmentOptions o;
  o.dir = dir;
  o.job_id = "real";
  auto seg = MappedSegment::OpenOrCreate(o);
  REQUIRE(seg.ok());
  CHECK((*seg)->warning().empty());
  REQUIRE(symlink((*seg)->path().c_str(), SegmentPath(dir, "linked").c_str()) == 0);
  auto linked = MappedSegment::Attach(SegmentPath(dir, "linked"));
  CHECK(absl::IsFailedPrecondition(linked.status()));
  CHECK_THAT(std::string(linked.status().message()), Catch::Contains("symbolic link"));
  // A world-writable segment owned by another user (only root can make one here).
  if (geteuid() == 0) {
    REQUIRE(chmod((*seg)->path().c_str(), 0666) == 0);
    REQUIRE(chown((*seg)->path().c_str(), 12345, 12345) == 0);
    auto foreign = MappedSegment::Attach((*seg)->path());
    REQUIRE(foreign.ok());
    CHECK_THAT((*foreign)->warning(), Catch::Contains("writable by every user"));
  }
}

}  // namespace
}  // namespace stagefrontier::shm
