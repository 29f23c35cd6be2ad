#include "daemon/common/untrusted_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/common/fd_io.h"

namespace stagefrontier {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

absl::Status OpenError(const std::string& what, int err) {
  const std::string text = absl::StrCat(what, ": ", std::strerror(err));
  // O_NOFOLLOW on a link gives ELOOP; O_DIRECTORY on a link to a directory gives ENOTDIR.
  if (err == ELOOP) return absl::FailedPreconditionError(absl::StrCat(what, " is a symbolic link"));
  if (err == ENOENT) return absl::NotFoundError(text);
  if (err == ENOTDIR) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " is not a directory (or is a symbolic link)"));
  }
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(text);
  return absl::UnavailableError(text);
}

bool OneComponent(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<UniqueFd> OpenDirectoryNoFollow(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("empty directory path");
  // The folders above the last one are the operator's configuration (they may well go through
  // a link such as /var/run): resolved once, then walked without following anything, so a link
  // swapped in afterwards is refused. The last component is never followed.
  std::string trimmed = path;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  const size_t slash = trimmed.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : trimmed.substr(0, slash + 1);
  const std::string last = slash == std::string::npos ? trimmed : trimmed.substr(slash + 1);
  char resolved[PATH_MAX];
  if (::realpath(parent.c_str(), resolved) == nullptr) return OpenError(parent, errno);
  UniqueFd dir(::open("/", kDirFlags));
  if (!dir.valid()) return OpenError("/", errno);
  std::string walked;
  std::vector<std::string> parts = absl::StrSplit(resolved, '/', absl::SkipEmpty());
  if (!last.empty()) parts.push_back(last);  // empty: the path was "/"
  for (const std::string& part : parts) {
    absl::StrAppend(&walked, "/", part);
    if (part == ".") continue;
    UniqueFd next(::openat(dir.get(), part.c_str(), kDirFlags));
    if (!next.valid()) return OpenError(walked, errno);
    dir = std::move(next);
  }
  return dir;
}

absl::StatusOr<UniqueFd> OpenSubdirectoryNoFollow(int dir_fd, const std::string& name) {
  if (!OneComponent(name)) return absl::InvalidArgumentError(absl::StrCat("bad name ", name));
  UniqueFd fd(::openat(dir_fd, name.c_str(), kDirFlags));
  if (!fd.valid()) return OpenError(name, errno);
  return fd;
}

absl::StatusOr<UniqueFd> OpenFileNoFollow(int dir_fd, const std::string& name) {
  if (!OneComponent(name)) return absl::InvalidArgumentError(absl::StrCat("bad name ", name));
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return OpenError(name, errno);
  return fd;
}

std::vector<std::string> ListDirectory(int dir_fd) {
  std::vector<std::string> out;
  // fdopendir takes the descriptor over: give it a copy, rewound for a fresh listing.
  const int copy = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return out;
  DIR* d = ::fdopendir(copy);
  if (d == nullptr) {
    ::close(copy);
    return out;
  }
  ::rewinddir(d);
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool EntryExists(int dir_fd, const std::string& name) {
  struct stat st {};
  return ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

absl::StatusOr<struct stat> StatNoFollow(int dir_fd, const std::string& name) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return OpenError(name, errno);
  return st;
}

absl::Status CreateExclusive(int dir_fd, const std::string& name, const std::string& text) {
  if (!OneComponent(name)) return absl::InvalidArgumentError(absl::StrCat("bad name ", name));
  UniqueFd fd(
      ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    if (errno == EEXIST) return absl::AlreadyExistsError(absl::StrCat(name, " exists"));
    return OpenError(name, errno);
  }
  if (const int err = WriteFully(fd.get(), text); err != 0) {
    return OpenError(absl::StrCat("writing ", name), err);
  }
  return absl::OkStatus();
}

}  // namespace stagefrontier
