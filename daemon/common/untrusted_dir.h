// Files in directories that a less trusted user can write (a trainer's capture folders, read
// and marked by a sidecar that may run as root). Every name is opened relative to a directory
// fd with O_NOFOLLOW, the directory itself walked from "/" one component at a time, so no
// symbolic link planted anywhere on the way — or swapped in between a check and a use — can
// point the caller at a file of someone else's. New files are created with O_EXCL: an entry
// already there, link or not, is never opened for writing, so nothing is truncated.
//
//   absl::StatusOr<UniqueFd> dir = OpenDirectoryNoFollow("/dev/shm/stagefrontier-captures");
//   absl::StatusOr<UniqueFd> job = OpenSubdirectoryNoFollow(dir->get(), "job1");
//   for (const std::string& name : ListDirectory(job->get())) { ... }
//   absl::Status s = CreateExclusive(job->get(), "trace.json.uploaded", "1234\n");
#ifndef STAGEFRONTIER_DAEMON_COMMON_UNTRUSTED_DIR_H_
#define STAGEFRONTIER_DAEMON_COMMON_UNTRUSTED_DIR_H_

#include <sys/stat.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace stagefrontier {

// Owns one file descriptor; closes it when destroyed.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Opens the directory at `path` (absolute or relative to the working directory): the folders
// above the last one are resolved once (they are the operator's configuration), then every
// component is opened without following a link, the last one included. FailedPrecondition
// names the component that is a link or not a directory; NotFound when a component is missing.
[[nodiscard]] absl::StatusOr<UniqueFd> OpenDirectoryNoFollow(const std::string& path);

// Opens `name` (one component, no '/') inside `dir_fd` as a directory, refusing a link.
[[nodiscard]] absl::StatusOr<UniqueFd> OpenSubdirectoryNoFollow(int dir_fd,
                                                                const std::string& name);

// Opens `name` inside `dir_fd` for reading without following a link and without blocking on
// a FIFO. FailedPrecondition for a link, NotFound when gone; the caller checks the type.
[[nodiscard]] absl::StatusOr<UniqueFd> OpenFileNoFollow(int dir_fd, const std::string& name);

// The names in the directory, sorted, without "." and "..".
std::vector<std::string> ListDirectory(int dir_fd);

// Whether `name` exists in `dir_fd`, of whatever type (a dangling link counts).
bool EntryExists(int dir_fd, const std::string& name);

// lstat of `name` in `dir_fd`.
[[nodiscard]] absl::StatusOr<struct stat> StatNoFollow(int dir_fd, const std::string& name);

// Creates `name` in `dir_fd` holding `text`, mode 0644, only if no entry of that name exists
// (O_CREAT|O_EXCL|O_NOFOLLOW): AlreadyExists otherwise, whatever the entry is.
[[nodiscard]] absl::Status CreateExclusive(int dir_fd, const std::string& name,
                                           const std::string& text);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_UNTRUSTED_DIR_H_
