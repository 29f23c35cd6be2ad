// The coordinator's store of collected capture files: <root>/<job>/trace_rank<R>_step<F>.json,
// written from the sidecars' chunks (proto/stagefrontier/v1/captures.proto) through a ".part"
// file renamed when complete. The directory is the index: a restarted coordinator finds every
// stored file, and an upload cut short resumes from the ".part" file's size. Retention keeps
// at most max_files complete files and max_total_bytes, dropping the oldest first.
//
//   CaptureStore store({.root = data_dir + "/captures"});
//   absl::StatusOr<v1::CaptureChunkAck> ack = store.Accept(chunk);
//   for (const StoredCapture& f : store.Files("job1")) ...
//
// Thread-safe.
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_STORE_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_STORE_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "stagefrontier/v1/captures.pb.h"

namespace stagefrontier {

struct CaptureStoreOptions {
  std::string root;                        // created if missing
  uint64_t max_file_bytes = 256ULL << 20;  // a larger capture is refused
  uint64_t max_total_bytes = 4ULL << 30;   // retention
  int max_files = 1000;                    // retention
  uint32_t max_chunk_bytes = 4U << 20;     // one chunk's raw bytes at most
  // An upload whose ".part" file got no chunk for this long is abandoned (its sidecar never
  // came back): RemoveAbandonedUploads drops it. A sidecar that comes back later starts over.
  int64_t abandoned_upload_s = 3600;
};

struct StoredCapture {
  std::string job;
  std::string file_name;
  std::string path;
  int32_t rank = -1;
  int64_t first_step = -1;
  uint64_t bytes = 0;
  int64_t stored_ns = 0;  // the file's modification time
};

class CaptureStore {
 public:
  struct Counters {
    uint64_t chunks = 0;     // chunks written
    uint64_t files = 0;      // files completed since start
    uint64_t bytes = 0;      // their bytes
    uint64_t refused = 0;    // chunks refused (bad, too large, not writable)
    uint64_t evicted = 0;    // files dropped by retention
    uint64_t abandoned = 0;  // uploads dropped unfinished (RemoveAbandonedUploads)
  };

  explicit CaptureStore(CaptureStoreOptions options);

  // Creates the root. Unavailable, with the reason, when it cannot.
  [[nodiscard]] absl::Status Open();

  // Called with each file completed, outside the store's lock.
  void SetOnComplete(std::function<void(const StoredCapture&)> on_complete) {
    on_complete_ = std::move(on_complete);
  }

  // Writes one chunk. Returns the ack (next_offset: where the sender goes on; a chunk that does
  // not start there is not written). InvalidArgument for a bad job or file name or a chunk that
  // is malformed or runs past file_bytes; ResourceExhausted for a file over max_file_bytes;
  // Unavailable when the disk refuses the write (the .part file is left as it was).
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
  // Drops the oldest files beyond the limits, never `keep` (the file just completed).
  void EnforceRetentionLocked(const std::string& keep);

  CaptureStoreOptions options_;
  std::function<void(const StoredCapture&)> on_complete_;
  mutable std::mutex mu_;
  Counters counters_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_STORE_H_
