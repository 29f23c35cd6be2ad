// Maps a segment file: one file per job and node, `<dir>/stagefrontier.<job id>.seg`, where
// <dir> is /dev/shm by default or any tmpfs directory (a Kubernetes hostPath, say).
//
// Creation tolerates any start order and concurrent creators: a creator initializes the whole
// segment in a private temporary file and publishes it with link(2), which fails if another
// creator won. Nobody ever maps a half-initialized segment, and the losers attach to the winner.
//
//   SegmentOptions o{.dir = "/dev/shm", .job_id = "run42", .slot_count = 8};
//   absl::StatusOr<std::unique_ptr<MappedSegment>> seg = MappedSegment::OpenOrCreate(o);
//   if (!seg.ok()) { /* seg.status() says which file and why */ }
//   SegmentView& view = (*seg)->view();
#ifndef STAGEFRONTIER_SHM_SEGMENT_FILE_H_
#define STAGEFRONTIER_SHM_SEGMENT_FILE_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "shm/mapping_guard.h"
#include "shm/segment_view.h"

namespace stagefrontier::shm {

inline constexpr char kDefaultSegmentDir[] = "/dev/shm";

struct SegmentOptions {
  std::string dir = kDefaultSegmentDir;
  std::string job_id;
  // Used only when this call creates the segment; an existing segment keeps its geometry.
  uint32_t slot_count = 8;
  uint32_t ring_capacity = 1024;
  // Records per probe ring (layout v2); 0 creates a layout v1 segment without probe rings.
  uint32_t probe_ring_capacity = v2::kDefaultProbeRingCapacity;
  // Empty: mode 0600, owner only. Otherwise the segment belongs to this group (a name or a
  // numeric gid), mode 0660.
  std::string group;
  // Watch the mapping with a MappingGuard (mapping_guard.h): a truncated file then costs this
  // segment, not the process. STAGEFRONTIER_SIGBUS_GUARD=0 turns it off in the stub.
  bool guard_sigbus = true;
};

// "<dir>/stagefrontier.<job_id>.seg".
std::string SegmentPath(const std::string& dir, const std::string& job_id);

class MappedSegment {
 public:
  ~MappedSegment();
  MappedSegment(const MappedSegment&) = delete;
  MappedSegment& operator=(const MappedSegment&) = delete;

  // Attaches to the job's segment, creating it if it does not exist. Fails with
  // InvalidArgument (bad options, unknown group), DataLoss / FailedPrecondition (an existing
  // file that is not a usable segment: see SegmentView::Open), or the errno-derived status
  // of a failed system call, each naming the path.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<MappedSegment>> OpenOrCreate(
      const SegmentOptions& options);

  // Attaches to an existing segment file; never creates and never follows a symbolic link.
  // Fails as OpenOrCreate, and with NotFound when the file does not exist.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<MappedSegment>> Attach(
      const std::string& path, bool guard_sigbus = true);

  // Takes the segment's single-reader lock (flock). Fails with ResourceExhausted if another
  // process already holds it: two sidecars must not drain the same rings.
  [[nodiscard]] absl::Status LockForReading();

  SegmentView& view() { return view_; }
  const std::string& path() const { return path_; }
  // True if this call created the segment.
  bool created() const { return created_; }
  // A caution about the file, empty if none: it is writable by every user of the machine and
  // owned by another user, so anyone could have written (or may rewrite) its records.
  const std::string& warning() const { return warning_; }
  // True once the file was truncated under an access (see mapping_guard.h): the mapping now
  // holds private zeros. One relaxed load: cheap enough for every step.
  bool lost() const { return guard_.lost(); }
  // Checks that the segment is still what was attached: not lost, the file not shrunk below
  // the mapping (fstat), the same inode at the path, and the header's geometry unchanged.
  // Returns DataLoss naming what changed. One fstat and one stat: for the sidecar's periodic
  // check, not for the stub's steps.
  [[nodiscard]] absl::Status CheckIntact() const;
  // (device, inode) of the mapped file.
  std::pair<uint64_t, uint64_t> file_id() const { return {dev_, ino_}; }

 private:
  MappedSegment(std::string path, int fd, void* base, size_t size, SegmentView view, bool created)
      : path_(std::move(path)), fd_(fd), base_(base), size_(size), view_(view), created_(created) {}
  static absl::StatusOr<std::unique_ptr<MappedSegment>> MapExisting(const std::string& path,
                                                                    bool guard_sigbus);
  // Stats the open file: identity, and the ownership warning.
  void Describe();
  static absl::StatusOr<std::unique_ptr<MappedSegment>> CreateAndPublish(
      const SegmentOptions& options, const std::string& path);

  std::string path_;
  int fd_;
  void* base_;
  size_t size_;
  SegmentView view_;
  bool created_;
  MappingGuard guard_;
  uint64_t dev_ = 0;
  uint64_t ino_ = 0;
  std::string warning_;
};

}  // namespace stagefrontier::shm

#endif  // STAGEFRONTIER_SHM_SEGMENT_FILE_H_
