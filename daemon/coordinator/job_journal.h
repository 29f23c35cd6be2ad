// The coordinator's durable record of one job: an append-only file of framed records
// (docs/journal-format.md, format 2):
//
//   file   := "SFJOURNL" | format:u32 LE = 2 | reserved:u32 | record*
//   record := sync:u32 LE = 0x4A524653 | crc:u32 LE | length:u32 LE | JournalRecord[length]
//
// `crc` is CRC-32C over the length bytes and the payload. The sync word makes every record
// findable: a damaged region is skipped by resynchronizing on the next record whose length
// and checksum hold, so one bad byte never costs the records after it. Format 1 (no file
// header, [length][crc of payload][payload]) is still read, and rewritten as format 2.
//
// Recovery never shortens or rewrites a damaged file in place: a damaged tail is first saved
// to a side file and only then cut off; damage with intact records after it makes the file
// move aside (kept, never deleted) and a new file with every intact record take its place.
// Files that are not journals, or of a newer format, are left untouched.
//
//   JournalOpenInfo info;
//   auto journal = JobJournal::Open(path, /*fsync=*/true,
//       [&](const v1::JournalRecord& r) { return state.Replay(r); }, &info);
//   (*journal)->Append(record);
//   absl::Status s = (*journal)->Flush();   // durable when it returns OK (with fsync)
//
// Thread-safe. Appending never waits for a Flush in progress (group commit): a Flush writes
// what was appended before it started.
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_JOB_JOURNAL_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_JOB_JOURNAL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "stagefrontier/v1/journal.pb.h"

namespace stagefrontier {

// Largest record accepted (a corrupt length beyond it means damage, not a huge record).
inline constexpr uint32_t kMaxJournalRecordBytes = 64 << 20;
inline constexpr char kJournalMagic[8] = {'S', 'F', 'J', 'O', 'U', 'R', 'N', 'L'};
inline constexpr uint32_t kJournalFormat = 2;
inline constexpr size_t kJournalHeaderBytes = 16;
inline constexpr uint32_t kJournalRecordSync = 0x4A524653;  // "SFRJ" little-endian
inline constexpr size_t kJournalRecordHeaderBytes = 12;

// Bytes the scan could not use: [offset, offset + bytes), and why.
struct JournalRegion {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  std::string reason;
};

struct JournalScan {
  uint32_t format = 0;  // 1 or 2; 0 when the bytes are not a journal of a known format
  uint64_t records = 0;
  std::vector<JournalRegion> skipped;  // damaged regions, in file order
  uint64_t valid_end = 0;              // just past the last intact record (or the header)
  std::string error;  // why scanning stopped early (unknown format, a sink failure)
  // True when every skipped region lies after the last intact record (a torn tail).
  bool TailOnly() const;
};

// Scans `data`, calling `sink` for each intact record in order (each record a record block
// holds, in its place: daemon/archive/record_block.h) and skipping damaged regions by
// resynchronizing on the next intact record. Stops (setting `error`) on an unknown format
// or when `sink` fails. Never reads outside `data`.
JournalScan ScanJournal(absl::string_view data,
                        absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink);

// Whether `status` (from JobJournal::Open) says the file holds no intact record at all: not a
// journal, or one whose every byte is damaged. Such a file is moved aside (SetJournalAside), so
// that its job id can be declared anew.
bool IsNoIntactRecord(const absl::Status& status);

// Renames the journal at `path` to "<path>.unreadable-<unix time>" (kept for the operator, no
// longer restored); returns the new name.
[[nodiscard]] absl::StatusOr<std::string> SetJournalAside(const std::string& path);

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

class JobJournal {
 public:
  ~JobJournal();
  JobJournal(const JobJournal&) = delete;
  JobJournal& operator=(const JobJournal&) = delete;

  // Creates a new journal at `path` holding `records`, atomically: written to a hidden
  // temporary file in the same directory, synced (with fsync), then linked into place, so that
  // a crash or a full disk leaves either no journal or a whole one. AlreadyExists if `path`
  // exists; Unavailable (naming the path and the errno) when the data directory cannot take
  // it, with nothing left behind.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JobJournal>> Create(
      const std::string& path, bool fsync, std::span<const v1::JournalRecord> records);

  // Opens an existing journal (never through a symbolic link), replays every intact record
  // (a record block's records in its place) through `replay` and repairs damage as described at
  // the top. Fails, leaving the file as it was, with FailedPrecondition when it is not a regular
  // file, not a journal, of a newer format or holds a record block of a newer version; with
  // InvalidArgument for a malformed record block; with the status `replay` returned; or with
  // the errno-derived status of a failed system call, naming the path.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JobJournal>> Open(
      const std::string& path, bool fsync,
      absl::FunctionRef<absl::Status(const v1::JournalRecord&)> replay, JournalOpenInfo* info);

  // Open when `path` exists, else Create it empty: for files that start empty and grow (the
  // node ledger, the fleet baseline). Fails as those, or with Unavailable when `path` cannot
  // be examined.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JobJournal>> OpenOrCreate(
      const std::string& path, bool fsync,
      absl::FunctionRef<absl::Status(const v1::JournalRecord&)> replay, JournalOpenInfo* info);

  // Rewrites the journal at `path`, whose declaration was lost, as a new journal holding
  // `declaration` then every other intact record of the old one (any declarations in it are
  // dropped); the old file is kept under another name (info->kept_original). Fails as Open
  // (a file that is not a journal is left untouched), or with the errno-derived status of a
  // failed write.
  [[nodiscard]] static absl::Status Salvage(const std::string& path, bool fsync,
                                            const v1::JournalRecord& declaration,
                                            JournalOpenInfo* info);

  // Buffers one record; written by Flush.
  void Append(const v1::JournalRecord& record);
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

  // For compaction (journal_compactor.h), in file offsets: [0, compacted_end) holds the file
  // header, the first record (the declaration) and every record block after it up to the first
  // plain record; [compacted_end, written_end) the records written since.
  struct Layout {
    uint64_t compacted_end = 0;
    uint64_t written_end = 0;
  };
  Layout CurrentLayout() const;
  // A descriptor of the journal file for reading (the caller closes it); it stays valid and
  // keeps showing these bytes when ReplacePrefix replaces the file.
  [[nodiscard]] absl::StatusOr<int> OpenForReading() const;
  // Makes the file at `new_prefix_path` (in the journal's directory; a file header and frames
  // holding the same records as [0, was.written_end), its first `new_compacted_end` bytes a
  // compacted prefix) the journal: appends to it what was written after `was.written_end`,
  // syncs it (with fsync) and renames it over the journal. Appending goes on meanwhile; a
  // Flush waits for the swap only. Fails with FailedPrecondition when the layout is no longer
  // `was` or the new file would not be smaller, with the errno-derived status of a failed call;
  // on failure the journal is as it was and `new_prefix_path` is removed.
  [[nodiscard]] absl::Status ReplacePrefix(const Layout& was, const std::string& new_prefix_path,
                                           uint64_t new_compacted_end);

 private:
  JobJournal(std::string path, int fd, uint64_t size, bool fsync, uint64_t compacted_end)
      : path_(std::move(path)),
        fd_(fd),
        size_(size),
        compacted_end_(compacted_end),
        appended_(size),
        durable_(size),
        fsync_(fsync) {}

  const std::string path_;
  mutable std::mutex io_mu_;  // one Flush (or swap) at a time; guards fd_, size_, base_,
                              // compacted_end_
  int fd_;
  uint64_t size_;          // bytes in the file
  uint64_t base_ = 0;      // bytes compaction took out of the file: position = base_ + offset
  uint64_t compacted_end_;
  mutable std::mutex mu_;  // guards pending_, appended_, scratch_
  std::string pending_;
  uint64_t appended_;
  std::string scratch_;
  std::atomic<uint64_t> durable_;
  const bool fsync_;
};

// Reads the format-2 frame at `offset` of `data` into `record`: returns the frame's size, or 0
// when no intact frame starts there (checked as a scan checks it).
size_t ReadJournalFrame(absl::string_view data, size_t offset, v1::JournalRecord* record);

// Appends one format-2 frame holding `payload` (a serialized JournalRecord) to `out`.
void AppendJournalFrame(absl::string_view payload, std::string* out);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_JOB_JOURNAL_H_
