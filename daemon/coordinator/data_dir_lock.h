// One coordinator per data directory: the coordinator holds an exclusive lock on
// <data-dir>/coordinator.lock for its whole life (flock, released by the kernel when the
// process ends however it ends), with its pid written inside for the error the next one prints.
// A second coordinator on the same directory would replay the live one's journals and append
// to them beside it.
//
//   absl::StatusOr<DataDirLock> lock = DataDirLock::Acquire(data_dir);
//   if (!lock.ok()) { spdlog::error("{}", lock.status().message()); return 2; }
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_DATA_DIR_LOCK_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_DATA_DIR_LOCK_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace stagefrontier {

class DataDirLock {
 public:
  // FailedPrecondition naming the other process ("another coordinator (pid N) uses DIR") when
  // the lock is held; Unavailable when the lock file cannot be made.
  [[nodiscard]] static absl::StatusOr<DataDirLock> Acquire(const std::string& data_dir);

  DataDirLock(DataDirLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  DataDirLock& operator=(DataDirLock&&) = delete;
  DataDirLock(const DataDirLock&) = delete;
  ~DataDirLock();

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_DATA_DIR_LOCK_H_
