// One coordinator per data directory: the second one is refused, naming the first's pid, and
// the directory is free again once the first lets go (or dies: the kernel drops the lock).
#include "daemon/coordinator/data_dir_lock.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <optional>
#include <string>

namespace stagefrontier {
namespace {

std::string TempDir() {
  char dir[] = "/tmp/sf_lock_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  return dir;
}

TEST_CASE("data dir lock: one holder at a time, the other told who") {
  const std::string dir = TempDir();
  std::optional<DataDirLock> first;
  {
    absl::StatusOr<DataDirLock> l = DataDirLock::Acquire(dir);
    REQUIRE(l.ok());
    first.emplace(*std::move(l));
  }
  const absl::StatusOr<DataDirLock> second = DataDirLock::Acquire(dir);
  REQUIRE_FALSE(second.ok());
  CHECK(absl::IsFailedPrecondition(second.status()));
  CHECK_THAT(std::string(second.status().message()),
             Catch::Contains("another coordinator (pid " + std::to_string(::getpid()) +
                             ") uses --data-dir " + dir));
  first.reset();
  CHECK(DataDirLock::Acquire(dir).ok());
}

TEST_CASE("data dir lock: a holder that dies without letting go frees the directory") {
  const std::string dir = TempDir();
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    absl::StatusOr<DataDirLock> l = DataDirLock::Acquire(dir);
    char c = l.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    ::pause();  // killed below, never releasing it itself
    ::_exit(0);
  }
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  REQUIRE(c == 'y');
  CHECK_FALSE(DataDirLock::Acquire(dir).ok());
  ::kill(child, SIGKILL);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  CHECK(DataDirLock::Acquire(dir).ok());
}

TEST_CASE("data dir lock: a directory that cannot hold the lock file says why") {
  const absl::StatusOr<DataDirLock> l = DataDirLock::Acquire("/nonexistent/dir");
  CHECK(absl::IsUnavailable(l.status()));
  CHECK_THAT(std::string(l.status().message()),
             Catch::Contains("/nonexistent/dir/coordinator.lock"));
}

}  // namespace
}  // namespace stagefrontier
