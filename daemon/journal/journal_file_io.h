// File I/O the record log and its live compaction share: whole reads and writes at an offset
// that retry short transfers and EINTR, errno mapped to a status the way callers act on it (a
// full disk is Unavailable: hold the acknowledgements and retry), hidden files beside a log that
// the next start removes when a crash leaves them, and names for files kept beside it.
//
//   std::string bytes;
//   absl::Status s = PreadExactly(fd, offset, size, "cannot read journal", path, &bytes);
//   s = PwriteAll(fd, bytes, offset, "cannot write journal", path);
//   absl::StatusOr<std::string> tmp = WriteHiddenFile(path, ".tail", bytes, /*fsync=*/true);
#ifndef STAGEFRONTIER_DAEMON_JOURNAL_JOURNAL_FILE_IO_H_
#define STAGEFRONTIER_DAEMON_JOURNAL_JOURNAL_FILE_IO_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stagefrontier {

// "<what> <path>: <strerror>" as NotFound (ENOENT), PermissionDenied (EACCES, EPERM),
// Unavailable (ENOSPC, EDQUOT, EFBIG, EIO, EROFS: the directory cannot take it now) or Internal.
absl::Status ErrnoStatus(int e, absl::string_view what, const std::string& path);

// Reads exactly `size` bytes of `fd` at `offset` into *out; fails (as ErrnoStatus, EIO for a
// file that ends first) naming `what` and `path`.
[[nodiscard]] absl::Status PreadExactly(int fd, uint64_t offset, size_t size,
                                        absl::string_view what, const std::string& path,
                                        std::string* out);

// As PreadExactly, into `size` bytes at `out` (a buffer the caller reuses).
[[nodiscard]] absl::Status PreadInto(int fd, uint64_t offset, char* out, size_t size,
                                     absl::string_view what, const std::string& path);

// Writes all of `bytes` to `fd` at `offset`; fails (as ErrnoStatus, ENOSPC for a write that
// makes no progress) naming `what` and `path`.
[[nodiscard]] absl::Status PwriteAll(int fd, absl::string_view bytes, uint64_t offset,
                                     absl::string_view what, const std::string& path);

// Copies `size` bytes of `in_fd` at `in_offset` to `out_fd` at `out_offset` in the kernel
// (copy_file_range: no user buffer, however long the range); fails (as ErrnoStatus, EIO for a
// source that ends first) naming `what` and `path`.
[[nodiscard]] absl::Status CopyRange(int in_fd, uint64_t in_offset, int out_fd, uint64_t out_offset,
                                     uint64_t size, absl::string_view what,
                                     const std::string& path);

// The directory of `path` ("." when it has none).
std::string DirOf(const std::string& path);

// A new name for a hidden file beside `path`: "<dir>/.<base><tag>-<pid>-<n>", unique within
// this process. Registries remove such files at start (their tags say which).
std::string HiddenSiblingPath(const std::string& path, absl::string_view tag);

// Writes `bytes` to a new hidden file beside `path` (HiddenSiblingPath), synced with fsync;
// returns its name. On failure nothing is left behind.
[[nodiscard]] absl::StatusOr<std::string> WriteHiddenFile(const std::string& path,
                                                          absl::string_view tag,
                                                          absl::string_view bytes, bool fsync);

// A name no file has yet, beside `path`: "<path><tag>-<unix seconds>[-n]" (for originals and
// damaged tails kept for the operator).
std::string AsideName(const std::string& path, absl::string_view tag);

// Makes a rename or link in directory `dir` durable (best effort).
void SyncDir(const std::string& dir);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_JOURNAL_JOURNAL_FILE_IO_H_
