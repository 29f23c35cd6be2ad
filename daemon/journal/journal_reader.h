// Reading a record log (journal_frame.h): every intact record in order, each record block's
// records in its place (daemon/archive/record_block.h). A damaged region is skipped by
// resynchronizing on the next record whose length and checksum hold, so one bad byte never
// costs the records after it; a format-2 file whose header is damaged keeps the records behind
// it. Also what recovery needs around a scan: the frames it found, the "no intact record"
// status, and moving an unreadable file aside.
//
//   JournalScan scan = ScanJournal(bytes, [&](const v1::JournalRecord& r) {
//     return state.Replay(r);
//   });
//   if (!scan.skipped.empty()) LOG(scan.skipped[0].reason);
#ifndef STAGEFRONTIER_DAEMON_JOURNAL_JOURNAL_READER_H_
#define STAGEFRONTIER_DAEMON_JOURNAL_JOURNAL_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/journal/journal_frame.h"
#include "stagefrontier/v1/journal.pb.h"

namespace stagefrontier {

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
// holds, in its place) and skipping damaged regions by resynchronizing on the next intact
// record. Stops (setting `error`) on an unknown format or when `sink` fails. Never reads outside
// `data`.
JournalScan ScanJournal(absl::string_view data,
                        absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink);

// One intact frame a scan found.
struct JournalFrame {
  uint64_t offset = 0;
  absl::string_view payload;  // into the scanned bytes
  bool compacted = false;     // the first record or a record block: part of a compacted prefix
};

// ScanJournal, also appending each intact frame (in file order) to `frames`: what recovery
// rewrites into a new file.
JournalScan ScanJournalFrames(absl::string_view data,
                              absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink,
                              std::vector<JournalFrame>* frames);

// FailedPrecondition carrying `message`, marked so that IsNoIntactRecord recognizes it.
absl::Status NoIntactRecordError(const std::string& message);

// Whether `status` (from RecordLog::Open) says the file holds no intact record at all: not a
// journal, or one whose every byte is damaged. Such a file is moved aside (SetJournalAside), so
// that its job id can be declared anew.
bool IsNoIntactRecord(const absl::Status& status);

// Renames the journal at `path` to "<path>.unreadable-<unix time>" (kept for the operator, no
// longer restored); returns the new name.
[[nodiscard]] absl::StatusOr<std::string> SetJournalAside(const std::string& path);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_JOURNAL_JOURNAL_READER_H_
