// The coordinator's store of collected capture files: <root>/<job>/trace_rank<R>_step<F>.json,
// written from the sidecars' chunks (proto/stagefrontier/v1/captures.proto) through a ".part"
// file renamed when complete. The directory is the index: a restarted coordinator finds every
// stored file, and an upload cut short resumes from the ".part" file's size.
//
// The files come from trainers' users, so the store is bounded against them: an upload
// reserves its declared size at its first chunk, and complete plus reserved bytes never pass
// max_total_bytes (nor max_job_bytes for one job); at most max_uploads_per_job and
// max_uploads_per_node are in flight; with an ExpectedFn only the files of captures the
// coordinator asked are taken. Retention is per job: a job over its own bounds drops its own
// oldest files, and the store over its bounds drops the oldest file of the job holding the
// most bytes, so a noisy job cannot evict another's evidence.
//
//   CaptureStore store({.root = data_dir + "/captures"});
//   absl::StatusOr<v1::CaptureChunkAck> ack = store.Accept(chunk);
//   for (const StoredCapture& f : store.Files("job1")) ...
//
// Thread-safe.
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_STORE_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_STORE_H_

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/captures/capture_file_name.h"
#include "stagefrontier/v1/captures.pb.h"

namespace stagefrontier {

struct CaptureStoreOptions {
  std::string root;                        // created if missing
  uint64_t max_file_bytes = 256ULL << 20;  // a larger capture is refused
  uint64_t max_total_bytes = 4ULL << 30;   // retention
  int max_files = 1000;                    // retention
  uint64_t max_job_bytes = 1ULL << 30;     // one job's complete and reserved bytes
  int max_job_files = 250;                 // one job's complete files
  int max_uploads_per_job = 64;            // uploads in flight (".part" files) for one job
  int max_uploads_per_node = 8;            // and from one node's sidecar
  uint32_t max_chunk_bytes = 4U << 20;     // one chunk's raw bytes at most
  // An upload whose ".part" file got no chunk for this long is abandoned (its sidecar never
  // came back): RemoveAbandonedUploads drops it. A sidecar that comes back later starts over.
  int64_t abandoned_upload_s = 3600;
};

struct StoredCapture {
  std::string job;
  std::string file_name;
  std::string path;
  CaptureFileKind kind = CaptureFileKind::kTrace;
  int32_t rank = -1;
  int64_t first_step = -1;  // traces
  uint64_t capture_id = 0;  // stacks and flight recorder dumps
  uint64_t bytes = 0;
  int64_t stored_ns = 0;  // the file's modification time
};

class CaptureStore {
 public:
  struct Counters {
    uint64_t chunks = 0;   // chunks written
    uint64_t files = 0;    // files completed since start
    uint64_t bytes = 0;    // their bytes
    uint64_t refused = 0;  // chunks refused (bad, too large, not writable, not asked, full)
    uint64_t refused_not_asked = 0;  // of which: no capture of the coordinator's asked for it
    uint64_t refused_busy = 0;       // of which: the store or the job full, too many in flight
    uint64_t evicted = 0;            // files dropped by retention
    uint64_t abandoned = 0;          // uploads dropped unfinished (RemoveAbandonedUploads)
    uint64_t partial_bytes = 0;      // now: bytes held in ".part" files
    uint64_t partial_uploads = 0;    // now: uploads in flight
  };
  // Whether the coordinator asked rank `name.rank` of `job` for this file: a trace starting at
  // name.first_step, or the stacks (flight recorder dump) of capture name.capture_id.
  using ExpectedFn = std::function<bool(const std::string& job, const CaptureFileName& name)>;

  explicit CaptureStore(CaptureStoreOptions options);

  // Creates the root and finds the uploads left in flight. Unavailable, with the reason, when
  // it cannot.
  [[nodiscard]] absl::Status Open();

  // Takes only files that `expected` says were asked (PermissionDenied otherwise). Unset: any
  // (tests, tools). Set before the first Accept.
  void SetExpected(ExpectedFn expected) { expected_ = std::move(expected); }

  // Called with each file completed, outside the store's lock.
  void SetOnComplete(std::function<void(const StoredCapture&)> on_complete) {
    on_complete_ = std::move(on_complete);
  }

  // Writes one chunk. Returns the ack (next_offset: where the sender goes on; a chunk that does
  // not start there is not written). InvalidArgument for a bad job or file name or a chunk that
  // is malformed or runs past file_bytes; ResourceExhausted for a file over max_file_bytes
  // (or over the whole store's or a job's bound); PermissionDenied for a file no capture asked;
  // Unavailable when the disk refuses the write (the .part file is left as it was), or for a
  // new upload while the store, the job or the node is at a bound (sent again later).
  [[nodiscard]] absl::StatusOr<v1::CaptureChunkAck> Accept(const v1::CaptureChunk& chunk);

  // Removes the ".part" files of uploads that got no chunk for abandoned_upload_s, at
  // `now_s` (seconds since the epoch). Returns how many; the coordinator calls it every minute.
  int RemoveAbandonedUploads(int64_t now_s);

  // The complete files of `job` (every job when empty), oldest first.
  std::vector<StoredCapture> Files(const std::string& job) const;

  Counters counters() const;
  const CaptureStoreOptions& options() const { return options_; }

 private:
  // `job`, or every job folder under the root when empty.
  std::vector<std::string> Jobs(const std::string& job) const;
  std::vector<StoredCapture> FilesLocked(const std::string& job) const;
  // Drops the oldest files beyond the limits (with `extra_bytes` more to come for `job`), never
  // `keep` (the file just completed): first `job`'s own beyond its bounds, then the biggest
  // job's beyond the store's. Returns whether the bounds now hold.
  bool EnforceRetentionLocked(const std::string& job, const std::string& keep,
                              uint64_t extra_bytes);
  // Whether `chunk` may be taken at all: its job id and file name (`name`, parsed), whether
  // this coordinator asked for it, and its sizes. OK or why not; once the job id and file name
  // are valid, `what` names the capture for the messages.
  absl::Status CheckChunkLocked(const v1::CaptureChunk& chunk,
                                const std::optional<CaptureFileName>& name, bool asked,
                                std::string* what);
  // Admits a new upload of `chunk` (its first chunk): caps and reservations. OK or why not.
  absl::Status AdmitLocked(const v1::CaptureChunk& chunk, const std::string& what);

  // An upload in flight: its ".part" file, by path.
  struct Upload {
    std::string job;
    std::string node;
    uint64_t declared = 0;  // the file's size as its chunks say
    uint64_t held = 0;      // bytes in the .part file
    uint64_t reserved() const { return std::max(declared, held); }
  };
  // A ".part" file of a capture under the root (lstat'ed).
  struct PartFile {
    std::string job;
    std::string path;
    struct stat st;
  };
  std::vector<PartFile> PartFilesLocked() const;

  CaptureStoreOptions options_;
  std::function<void(const StoredCapture&)> on_complete_;
  ExpectedFn expected_;
  mutable std::mutex mu_;
  Counters counters_;
  std::map<std::string, Upload> uploads_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_STORE_H_
