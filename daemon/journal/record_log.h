// An append-only file of framed records (journal_frame.h; docs/journal-format.md): a job's
// journal (daemon/coordinator/job_journal.h), the node ledger, the fleet baseline.
//
// Recovery never shortens or rewrites a damaged file in place: a damaged tail is first saved
// to a side file and only then cut off; damage with intact records after it makes the file
// move aside (kept, never deleted) and a new file with every intact record take its place.
// Files that are not journals, or of a newer format, are left untouched. A format-1 file is
// rewritten as format 2.
//
//   JournalOpenInfo info;
//   auto log = RecordLog::OpenOrCreate(path, /*fsync=*/true,
//       [&](const v1::JournalRecord& r) { return state.Replay(r); }, &info);
//   (*log)->Append(record);
//   absl::Status s = (*log)->Flush();   // durable when it returns OK (with fsync)
//
// Thread-safe. Appending never waits for a Flush in progress (group commit): a Flush writes
// what was appended before it started.
#ifndef STAGEFRONTIER_DAEMON_JOURNAL_RECORD_LOG_H_
#define STAGEFRONTIER_DAEMON_JOURNAL_RECORD_LOG_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/journal/journal_frame.h"
#include "daemon/journal/journal_reader.h"
#include "stagefrontier/v1/journal.pb.h"

namespace stagefrontier {

// What opening (or salvaging) a log found and repaired.
struct JournalOpenInfo {
  uint32_t format = 0;  // the format the file had
  uint64_t records = 0;
  std::vector<JournalRegion> skipped;
  uint64_t skipped_bytes = 0;
  std::string kept_original;  // where the damaged or format-1 original was kept
  std::string saved_tail;     // where a damaged tail was saved before it was cut off
  // One line for the log: records, what was skipped (offsets), where the originals went.
  std::string Describe() const;
};

class RecordLog {
 public:
  using Replay = absl::FunctionRef<absl::Status(const v1::JournalRecord&)>;

  ~RecordLog();
  RecordLog(const RecordLog&) = delete;
  RecordLog& operator=(const RecordLog&) = delete;

  // Creates a new log at `path` holding `records`, atomically: written to a hidden temporary
  // file in the same directory, synced (with fsync), then linked into place, so that a crash or
  // a full disk leaves either no log or a whole one. AlreadyExists if `path` exists;
  // Unavailable (naming the path and the errno) when the directory cannot take it, with nothing
  // left behind.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RecordLog>> Create(
      const std::string& path, bool fsync, std::span<const v1::JournalRecord> records);

  // Opens an existing log (never through a symbolic link), replays every intact record (a
  // record block's records in its place) through `replay` and repairs damage as described at
  // the top. Fails, leaving the file as it was, with FailedPrecondition when it is not a regular
  // file, not a journal (IsNoIntactRecord), of a newer format or holds a record block of a
  // newer version; with InvalidArgument for a malformed record block; with the status `replay`
  // returned; or with the errno-derived status of a failed system call, naming the path.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RecordLog>> Open(const std::string& path,
                                                                       bool fsync, Replay replay,
                                                                       JournalOpenInfo* info);

  // Open when `path` exists, else Create it empty: for files that start empty and grow (the
  // node ledger, the fleet baseline). Fails as those, or with Unavailable when `path` cannot
  // be examined.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RecordLog>> OpenOrCreate(
      const std::string& path, bool fsync, Replay replay, JournalOpenInfo* info);

  // Rewrites the log at `path` as a new one holding `first` then every other intact record for
  // which `keep` holds; the old file is kept under another name (info->kept_original). Fails as
  // Open (a file that is not a journal is left untouched), or with the errno-derived status of a
  // failed write.
  [[nodiscard]] static absl::Status Salvage(const std::string& path, bool fsync,
                                            const v1::JournalRecord& first,
                                            absl::FunctionRef<bool(const v1::JournalRecord&)> keep,
                                            JournalOpenInfo* info);

  // Buffers one record; written by Flush.
  void Append(const v1::JournalRecord& record);
  // Buffers JournalRecord{ranks {steps: [steps]}} (AppendRankStepsFrame: the same bytes,
  // without building the record).
  void AppendRankSteps(const v1::RankSteps& steps);
  // Writes what was appended before the call and, with fsync, waits until it is on stable
  // storage. Fails with the errno-derived status (Unavailable for a full disk); the records are
  // kept for the next try.
  [[nodiscard]] absl::Status Flush();

  // Position just past everything appended so far. Positions count bytes as if the file had
  // never been compacted (ReplacePrefix): they only grow, so acknowledgements waiting for one
  // are not confused by a file that shrank.
  uint64_t appended_bytes() const;
  // Position up to which records are durable (written, and synced with fsync).
  uint64_t durable_bytes() const { return durable_.load(std::memory_order_acquire); }
  const std::string& path() const { return path_; }
  bool syncs() const { return fsync_; }  // appends and swaps are synced with fsync

  // For live compaction (daemon/coordinator/journal_compactor.h), in file offsets:
  // [0, compacted_end) holds the file header, the first record (the declaration) and every
  // record block after it up to the first plain record; [compacted_end, written_end) the
  // records written since.
  struct Layout {
    uint64_t compacted_end = 0;
    uint64_t written_end = 0;
  };
  Layout CurrentLayout() const;
  // A descriptor of the log file for reading (the caller closes it); it stays valid and keeps
  // showing these bytes when ReplacePrefix replaces the file.
  [[nodiscard]] absl::StatusOr<int> OpenForReading() const;
  // Makes the file at `new_prefix_path` (in the log's directory; a file header and frames
  // holding the same records as [0, was.written_end), its first `new_compacted_end` bytes a
  // compacted prefix) the log: appends to it what was written after `was.written_end`, syncs
  // it (with fsync) and renames it over the log. Appending goes on meanwhile; a Flush waits
  // for the swap only. Fails with FailedPrecondition when the layout is no longer `was` or the
  // new file would not be smaller, with the errno-derived status of a failed call; on failure
  // the log is as it was and `new_prefix_path` is removed.
  [[nodiscard]] absl::Status ReplacePrefix(const Layout& was, const std::string& new_prefix_path,
                                           uint64_t new_compacted_end);

 private:
  RecordLog(std::string path, int fd, uint64_t size, bool fsync, uint64_t compacted_end)
      : path_(std::move(path)),
        fd_(fd),
        size_(size),
        compacted_end_(compacted_end),
        appended_(size),
        durable_(size),
        fsync_(fsync) {}

  // Runs `append` on pending_ under mu_, counting what it added into appended_.
  void AppendFrame(absl::FunctionRef<void(std::string* pending)> append);

  const std::string path_;
  mutable std::mutex io_mu_;  // one Flush (or swap) at a time; guards fd_, size_, base_,
                              // compacted_end_
  int fd_;
  uint64_t size_;      // bytes in the file
  uint64_t base_ = 0;  // bytes compaction took out of the file: position = base_ + offset
  uint64_t compacted_end_;
  mutable std::mutex mu_;  // guards pending_, appended_, scratch_
  std::string pending_;
  uint64_t appended_;
  std::string scratch_;
  std::atomic<uint64_t> durable_;
  const bool fsync_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_JOURNAL_RECORD_LOG_H_
