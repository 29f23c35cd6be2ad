// The coordinator's durable record of one job: an append-only file of framed records
// `[u32 length LE][u32 CRC-32C LE][JournalRecord protobuf]` (docs/journal-format.md).
// Replaying it rebuilds exactly what was accounted. A torn tail (a crash mid-append) or a
// damaged record is detected by length and checksum; opening truncates the file there and
// says how many bytes were dropped.
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
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "stagefrontier/v1/journal.pb.h"

namespace stagefrontier {

// Largest record accepted (a corrupt length beyond it means damage, not a huge record).
inline constexpr uint32_t kMaxJournalRecordBytes = 64 << 20;

struct JournalScan {
  size_t valid_bytes = 0;  // bytes of whole, checksummed, parsed records
  uint64_t records = 0;
  std::string error;  // why scanning stopped before the end; empty if it reached it
};

// Scans framed records in `data`, calling `sink` for each; stops at the first damaged or
// incomplete record, or when `sink` fails (its message goes into `error`).
JournalScan ScanJournal(absl::string_view data,
                        absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink);

struct JournalOpenInfo {
  uint64_t records = 0;
  uint64_t truncated_bytes = 0;  // a torn or damaged tail that was cut off
  std::string truncation_reason;
};

class JobJournal {
 public:
  ~JobJournal();
  JobJournal(const JobJournal&) = delete;
  JobJournal& operator=(const JobJournal&) = delete;

  // Opens `path` (creating it, mode 0600), replays every whole record through `replay`,
  // truncates a damaged tail. Fails with the errno-derived status naming the path, or with
  // the status `replay` returned.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JobJournal>> Open(
      const std::string& path, bool fsync,
      absl::FunctionRef<absl::Status(const v1::JournalRecord&)> replay, JournalOpenInfo* info);

  // Buffers one record; written by Flush.
  void Append(const v1::JournalRecord& record);
  // Writes what was appended before the call and, with fsync, waits until it is on stable
  // storage. Fails with the errno-derived status; the records are kept for the next try.
  [[nodiscard]] absl::Status Flush();

  // File offset just past everything appended so far.
  uint64_t appended_bytes() const;
  // File offset up to which records are durable (written, and synced with fsync).
  uint64_t durable_bytes() const { return durable_.load(std::memory_order_acquire); }
  const std::string& path() const { return path_; }

 private:
  JobJournal(std::string path, int fd, uint64_t size, bool fsync)
      : path_(std::move(path)),
        fd_(fd),
        size_(size),
        appended_(size),
        durable_(size),
        fsync_(fsync) {}

  const std::string path_;
  const int fd_;
  std::mutex io_mu_;       // one Flush at a time; guards size_
  uint64_t size_;          // bytes in the file
  mutable std::mutex mu_;  // guards pending_, appended_, scratch_
  std::string pending_;
  uint64_t appended_;
  std::string scratch_;
  std::atomic<uint64_t> durable_;
  const bool fsync_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_JOB_JOURNAL_H_
