#include "daemon/coordinator/data_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace stagefrontier {

absl::StatusOr<DataDirLock> DataDirLock::Acquire(const std::string& data_dir) {
  const std::string path = absl::StrCat(data_dir, "/coordinator.lock");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot open the lock file ", path, ": ", std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    ::close(fd);
    if (err != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat("cannot lock ", path, ": ", std::strerror(err)));
    }
    const std::string pid(absl::StripAsciiWhitespace(std::string(buf, n > 0 ? n : 0)));
    return absl::FailedPreconditionError(
        absl::StrCat("another coordinator", pid.empty() ? "" : absl::StrCat(" (pid ", pid, ")"),
                     " uses --data-dir ", data_dir, " (it holds ", path,
                     "): one coordinator per data directory"));
  }
  // Should this fail, the lock holds all the same; only the next one's message lacks the pid.
  const std::string pid = absl::StrCat(::getpid(), "\n");
  (void)!::ftruncate(fd, 0);
  (void)!::pwrite(fd, pid.data(), pid.size(), 0);
  return DataDirLock(fd);
}

DataDirLock::~DataDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace stagefrontier
