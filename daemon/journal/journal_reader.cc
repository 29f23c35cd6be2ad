#include "daemon/journal/journal_reader.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "daemon/archive/record_block.h"
#include "daemon/journal/journal_file_io.h"

namespace stagefrontier {
namespace {

constexpr absl::string_view kNoIntactRecordUrl = "stagefrontier/journal/no-intact-record";

// Hands `record` to `sink`, or each record of it when it is a record block. Sets *malformed
// when the record is a block that does not decode (nothing of it reached `sink`): damage behind
// an intact frame, skipped like a damaged frame. A block of a newer version is not damage.
absl::Status ReplayRecord(const v1::JournalRecord& record,
                          absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink,
                          bool* malformed) {
  *malformed = false;
  if (!record.has_block()) return sink(record);
  bool sink_failed = false;
  absl::Status s = DecodeRecordBlock(record.block(), [&](const v1::JournalRecord& r) {
    absl::Status each = sink(r);
    sink_failed = !each.ok();
    return each;
  });
  *malformed = !s.ok() && !sink_failed && absl::IsInvalidArgument(s);
  return s;
}

// After damage at `off`: the offset of the next intact frame (format 2: at a sync word), or
// data.size() when none follows. Sets *n to that frame's size (0 when none).
size_t Resync(absl::string_view data, size_t off, uint32_t format, v1::JournalRecord* record,
              size_t* n) {
  *n = 0;
  size_t next = off + 1;
  std::string ignored;
  for (; next < data.size(); ++next) {
    if (format == 2) {
      const void* hit = std::memchr(data.data() + next, 0x53, data.size() - next);  // 'S'
      if (hit == nullptr) return data.size();
      next = static_cast<size_t>(static_cast<const char*>(hit) - data.data());
    }
    if ((*n = TryJournalFrame(data, next, format, record, &ignored)) != 0) break;
  }
  return next;
}

// Reads the frames of `scan.format` from `off` on (see Scan).
void ScanFrames(absl::string_view data, size_t off,
                absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink,
                std::vector<JournalFrame>* frames, JournalScan& scan) {
  scan.valid_end = off;
  v1::JournalRecord record;
  std::string why;
  while (off < data.size()) {
    size_t n = TryJournalFrame(data, off, scan.format, &record, &why);
    if (n == 0) {
      const size_t next = Resync(data, off, scan.format, &record, &n);
      scan.skipped.push_back(JournalRegion{off, next - off, why});
      if (n == 0) break;
      off = next;
    }
    bool malformed = false;
    if (absl::Status s = ReplayRecord(record, sink, &malformed); malformed) {
      // An intact frame whose block does not decode: reported with its offset, the rest goes on.
      scan.skipped.push_back(JournalRegion{off, n, std::string(s.message())});
      off += n;
      continue;
    } else if (!s.ok()) {
      scan.error = absl::StrCat("record at offset ", off, ": ", s.message());
      return;
    }
    if (frames != nullptr) {
      const size_t header = JournalFrameHeaderBytes(scan.format);
      frames->push_back(JournalFrame{off, data.substr(off + header, n - header),
                                     scan.records == 0 || record.has_block()});
    }
    off += n;
    scan.valid_end = off;
    ++scan.records;
  }
}

}  // namespace

bool JournalScan::TailOnly() const {
  for (const JournalRegion& r : skipped) {
    if (r.offset < valid_end) return false;
  }
  return true;
}

JournalScan ScanJournalFrames(absl::string_view data,
                              absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink,
                              std::vector<JournalFrame>* frames) {
  JournalScan scan;
  if (data.size() >= sizeof(kJournalMagic) &&
      std::memcmp(data.data(), kJournalMagic, sizeof(kJournalMagic)) == 0) {
    if (data.size() < kJournalHeaderBytes) {
      scan.error = "the journal's file header is cut short";
      return scan;
    }
    const uint32_t format = LoadJournalLe32(data.data() + 8);
    if (format != kJournalFormat) {
      scan.error = absl::StrCat(
          "journal format ", format, " is ", format > kJournalFormat ? "newer than" : "not one of",
          " the formats this coordinator reads (1..", kJournalFormat, "): upgrade the coordinator");
      return scan;
    }
    scan.format = 2;
    ScanFrames(data, kJournalHeaderBytes, sink, frames, scan);
    return scan;
  }
  scan.format = 1;
  ScanFrames(data, 0, sink, frames, scan);
  if (scan.records > 0 || !scan.error.empty() || data.size() <= kJournalHeaderBytes) return scan;
  // Nothing reads as format 1: a format-2 journal whose header is damaged (one bad byte in the
  // magic) keeps the records behind it, found by their sync words as after any damage.
  JournalScan resynced;
  resynced.format = 2;
  resynced.skipped.push_back(JournalRegion{0, kJournalHeaderBytes, "the file header is damaged"});
  ScanFrames(data, kJournalHeaderBytes, sink, frames, resynced);
  return resynced.records > 0 ? resynced : scan;
}

JournalScan ScanJournal(absl::string_view data,
                        absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink) {
  return ScanJournalFrames(data, sink, nullptr);
}

absl::Status NoIntactRecordError(const std::string& message) {
  absl::Status s = absl::FailedPreconditionError(message);
  s.SetPayload(kNoIntactRecordUrl, absl::Cord("1"));
  return s;
}

bool IsNoIntactRecord(const absl::Status& status) {
  return status.GetPayload(kNoIntactRecordUrl).has_value();
}

absl::StatusOr<std::string> SetJournalAside(const std::string& path) {
  const std::string aside = AsideName(path, ".unreadable");
  if (::rename(path.c_str(), aside.c_str()) != 0) {
    return ErrnoStatus(errno, "cannot move the unreadable journal aside from", path);
  }
  SyncDir(DirOf(path));
  return aside;
}

}  // namespace stagefrontier
