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
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_JOB_JOURNAL_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_JOB_JOURNAL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
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
  // Writes what was appended and, with fsync, waits until it is on stable storage. Fails with
  // the errno-derived status; the buffered records are kept for the next try.
  [[nodiscard]] absl::Status Flush();

  uint64_t bytes_written() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  JobJournal(std::string path, int fd, uint64_t size, bool fsync)
      : path_(std::move(path)), fd_(fd), size_(size), fsync_(fsync) {}

  std::string path_;
  int fd_;
  uint64_t size_;
  bool fsync_;
  std::string pending_;
  std::string scratch_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_JOB_JOURNAL_H_
