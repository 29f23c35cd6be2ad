#include "shm/segment_file.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stagefrontier::shm {
namespace {

absl::Status ErrnoStatus(int err, const std::string& what, const std::string& path) {
  const std::string msg = absl::StrCat(what, " ", path, ": ", strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case ENOMEM:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::UnavailableError(msg);
  }
}

absl::StatusOr<gid_t> LookupGroup(const std::string& name) {
  // A numeric gid is taken as is: containers often have no name for the shared group.
  if (!name.empty() && name.size() <= 9 &&
      name.find_first_not_of("0123456789") == std::string::npos) {
    return static_cast<gid_t>(std::stoul(name));
  }
  std::vector<char> buf(16384);
  group grp{};
  group* result = nullptr;
  if (getgrnam_r(name.c_str(), &grp, buf.data(), buf.size(), &result) != 0 || result == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown group \"", name, "\" for the segment"));
  }
  return result->gr_gid;
}

}  // namespace

std::string SegmentPath(const std::string& dir, const std::string& job_id) {
  return absl::StrCat(dir, "/stagefrontier.", job_id, ".seg");
}

MappedSegment::~MappedSegment() {
  guard_.Release();  // before the range is unmapped
  if (base_ != nullptr) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

void MappedSegment::Describe() {
  struct stat st {};
  if (fstat(fd_, &st) != 0) return;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  if (st.st_uid != geteuid() && (st.st_mode & S_IWOTH) != 0) {
    warning_ = absl::StrCat("segment ", path_, " is writable by every user and owned by uid ",
                            st.st_uid, " (not this process's ", geteuid(),
                            "): anyone on this machine can forge or damage its records; create "
                            "segments with a group (--group / STAGEFRONTIER_SHM_GROUP) instead");
  }
}

absl::Status MappedSegment::CheckIntact() const {
  if (lost()) {
    return absl::DataLossError(
        absl::StrCat("segment ", path_, " was truncated while in use (its pages are gone)"));
  }
  struct stat st {};
  if (fstat(fd_, &st) != 0) return ErrnoStatus(errno, "cannot stat segment", path_);
  if (static_cast<uint64_t>(st.st_size) < size_) {
    return absl::DataLossError(absl::StrCat("segment ", path_, " shrank from ", size_, " to ",
                                            st.st_size, " bytes while in use: truncated"));
  }
  if (!view_.HeaderUnchanged()) {
    return absl::DataLossError(absl::StrCat(
        "segment ", path_,
        " had its header overwritten while in use (magic, version, geometry or job id changed)"));
  }
  struct stat at_path {};
  if (stat(path_.c_str(), &at_path) != 0 || at_path.st_ino != st.st_ino ||
      at_path.st_dev != st.st_dev) {
    return absl::DataLossError(
        absl::StrCat("segment ", path_, " was removed or replaced by another file"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MappedSegment>> MappedSegment::MapExisting(const std::string& path,
                                                                          bool guard_sigbus) {
  // O_NOFOLLOW: a symbolic link planted in a shared directory must not redirect us.
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ELOOP) {
    return absl::FailedPreconditionError(
        absl::StrCat("segment ", path, " is a symbolic link; segments are never followed"));
  }
  if (fd < 0) return ErrnoStatus(errno, "cannot open segment", path);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, "cannot stat segment", path);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat("segment ", path, " is not a regular file"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    close(fd);
    return absl::DataLossError(absl::StrCat("segment ", path, " is empty (0 bytes): truncated"));
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, "cannot map segment", path);
  }
  // Guard before the first access: the file may be truncated between fstat and here.
  MappingGuard guard = guard_sigbus ? MappingGuard::Watch(base, size) : MappingGuard();
  absl::StatusOr<SegmentView> view =
      guard_sigbus && !guard.guarded()
          // Unguarded, a truncation by its writer would kill this process: refused.
          ? absl::ResourceExhaustedError(absl::StrCat("no SIGBUS guard left for it (",
                                                      kMaxGuardedRanges,
                                                      " segments are mapped at once at most)"))
          : SegmentView::Open(base, size);
  if (view.ok() && guard.lost()) {
    view = absl::DataLossError("the file was truncated while being opened");
  }
  if (view.ok() && size > view->total_bytes()) {
    // Its writer chose the size; nothing beyond the geometry is a segment's.
    view = absl::DataLossError(absl::StrCat("the file is ", size, " bytes but its header says ",
                                            view->total_bytes(), ": not a segment's size"));
  }
  if (!view.ok()) {
    guard.Release();
    munmap(base, size);
    close(fd);
    return absl::Status(view.status().code(),
                        absl::StrCat("segment ", path, ": ", view.status().message()));
  }
  std::unique_ptr<MappedSegment> seg(new MappedSegment(path, fd, base, size, *view, false));
  seg->guard_ = std::move(guard);
  seg->Describe();
  return seg;
}

absl::StatusOr<std::unique_ptr<MappedSegment>> MappedSegment::CreateAndPublish(
    const SegmentOptions& options, const std::string& path) {
  const uint64_t size = options.probe_ring_capacity == 0
                            ? v1::SegmentBytes(options.slot_count, options.ring_capacity)
                            : v2::SegmentBytes(options.slot_count, options.ring_capacity,
                                               options.probe_ring_capacity);
  gid_t gid = static_cast<gid_t>(-1);
  if (!options.group.empty()) {
    absl::StatusOr<gid_t> g = LookupGroup(options.group);
    if (!g.ok()) return g.status();
    gid = *g;
  }
  const std::string tmp = absl::StrCat(path, ".", getpid(), ".tmp");
  const int fd = open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, "cannot create segment", tmp);
  auto fail = [&](int err, const char* what) {
    close(fd);
    unlink(tmp.c_str());
    return ErrnoStatus(err, what, tmp);
  };
  // The umask must not decide who may read the rings.
  if (fchmod(fd, options.group.empty() ? 0600 : 0660) != 0) return fail(errno, "cannot chmod");
  if (!options.group.empty() && fchown(fd, static_cast<uid_t>(-1), gid) != 0) {
    return fail(errno, "cannot give the group to");
  }
  // Reserve the pages now: writing to a sparse tmpfs file that runs out of space would kill
  // the trainer with SIGBUS later.
  if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(size)); err != 0) {
    return fail(err, "cannot reserve space for");
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return fail(errno, "cannot map");
  absl::StatusOr<SegmentView> view =
      SegmentView::Initialize(base, size, options.job_id, options.slot_count, options.ring_capacity,
                              options.probe_ring_capacity);
  if (!view.ok()) {
    munmap(base, size);
    close(fd);
    unlink(tmp.c_str());
    return view.status();
  }
  // Publish: link(2) fails with EEXIST if another creator published first.
  const int rc = link(tmp.c_str(), path.c_str());
  const int err = errno;
  unlink(tmp.c_str());
  if (rc != 0) {
    munmap(base, size);
    close(fd);
    if (err == EEXIST) return absl::AlreadyExistsError(path);
    return ErrnoStatus(err, "cannot publish segment", path);
  }
  std::unique_ptr<MappedSegment> seg(new MappedSegment(path, fd, base, size, *view, true));
  if (options.guard_sigbus) seg->guard_ = MappingGuard::Watch(base, size);
  seg->Describe();
  return seg;
}

absl::StatusOr<std::unique_ptr<MappedSegment>> MappedSegment::OpenOrCreate(
    const SegmentOptions& options) {
  if (absl::Status s = ValidateGeometry(options.job_id, options.slot_count, options.ring_capacity);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateProbeCapacity(options.probe_ring_capacity); !s.ok()) return s;
  const std::string path = SegmentPath(options.dir, options.job_id);
  // Attach, or create; a lost creation race means the winner's segment exists now.
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<std::unique_ptr<MappedSegment>> existing =
        MapExisting(path, options.guard_sigbus);
    if (existing.ok() || !absl::IsNotFound(existing.status())) return existing;
    absl::StatusOr<std::unique_ptr<MappedSegment>> created = CreateAndPublish(options, path);
    if (!absl::IsAlreadyExists(created.status())) return created;
  }
  return absl::UnavailableError(
      absl::StrCat("segment ", path, " kept appearing and disappearing while attaching"));
}

absl::StatusOr<std::unique_ptr<MappedSegment>> MappedSegment::Attach(const std::string& path,
                                                                     bool guard_sigbus) {
  return MapExisting(path, guard_sigbus);
}

absl::Status MappedSegment::LockForReading() {
  if (flock(fd_, LOCK_EX | LOCK_NB) == 0) return absl::OkStatus();
  if (errno == EWOULDBLOCK) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "segment ", path_, " is already drained by another reader (a second sidecar?)"));
  }
  return ErrnoStatus(errno, "cannot lock segment", path_);
}

}  // namespace stagefrontier::shm
