#include "daemon/journal/journal_file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace stagefrontier {

absl::Status ErrnoStatus(int e, absl::string_view what, const std::string& path) {
  const std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(e));
  switch (e) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT:
    case EFBIG:  // a file-size limit (RLIMIT_FSIZE) or quota
    case EIO:
    case EROFS:
      // The data directory cannot take it now: callers hold acknowledgements and retry.
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status PreadExactly(int fd, uint64_t offset, size_t size, absl::string_view what,
                          const std::string& path, std::string* out) {
  out->assign(size, '\0');
  return PreadInto(fd, offset, out->data(), size, what, path);
}

absl::Status PreadInto(int fd, uint64_t offset, char* out, size_t size, absl::string_view what,
                       const std::string& path) {
  for (size_t got = 0; got < size;) {
    const ssize_t n = ::pread(fd, out + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoStatus(n < 0 ? errno : EIO, what, path);
    got += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status PwriteAll(int fd, absl::string_view bytes, uint64_t offset, absl::string_view what,
                       const std::string& path) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n =
        ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoStatus(n < 0 ? errno : ENOSPC, what, path);
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status CopyRange(int in_fd, uint64_t in_offset, int out_fd, uint64_t out_offset,
                       uint64_t size, absl::string_view what, const std::string& path) {
  for (uint64_t copied = 0; copied < size;) {
    loff_t from = static_cast<loff_t>(in_offset + copied);
    loff_t to = static_cast<loff_t>(out_offset + copied);
    const ssize_t n =
        ::copy_file_range(in_fd, &from, out_fd, &to, static_cast<size_t>(size - copied), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoStatus(n < 0 ? errno : EIO, what, path);
    copied += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

std::string HiddenSiblingPath(const std::string& path, absl::string_view tag) {
  static std::atomic<uint64_t> counter{0};
  const size_t slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return absl::StrCat(DirOf(path), "/.", base, tag, "-", ::getpid(), "-", counter.fetch_add(1));
}

absl::StatusOr<std::string> WriteHiddenFile(const std::string& path, absl::string_view tag,
                                            absl::string_view bytes, bool fsync) {
  const std::string tmp = HiddenSiblingPath(path, tag);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoStatus(errno, "cannot create", tmp);
  absl::Status s = PwriteAll(fd, bytes, 0, "cannot write", tmp);
  if (s.ok() && fsync && ::fdatasync(fd) != 0) s = ErrnoStatus(errno, "cannot fsync", tmp);
  ::close(fd);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return tmp;
}

std::string AsideName(const std::string& path, absl::string_view tag) {
  const std::string base = absl::StrCat(path, tag, "-", ::time(nullptr));
  std::string name = base;
  struct stat st {};
  for (int n = 1; ::lstat(name.c_str(), &st) == 0; ++n) name = absl::StrCat(base, "-", n);
  return name;
}

void SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

}  // namespace stagefrontier
