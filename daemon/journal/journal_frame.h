// The framing of the record log (docs/journal-format.md, format 2): a file header, then frames
// each holding one serialized JournalRecord:
//
//   file   := "SFJOURNL" | format:u32 LE = 2 | reserved:u32 | record*
//   record := sync:u32 LE = 0x4A524653 | crc:u32 LE | length:u32 LE | JournalRecord[length]
//
// `crc` is CRC-32C over the length bytes and the payload. Format 1 (no file header,
// [length][crc of payload][payload]) is still read.
//
//   std::string bytes = JournalFileHeader();
//   AppendJournalFrame(record.SerializeAsString(), &bytes);
//   v1::JournalRecord back;
//   size_t n = ReadJournalFrame(bytes, kJournalHeaderBytes, &back);  // 0: no intact frame
#ifndef STAGEFRONTIER_DAEMON_JOURNAL_JOURNAL_FRAME_H_
#define STAGEFRONTIER_DAEMON_JOURNAL_JOURNAL_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>

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
inline constexpr size_t kJournalFormat1RecordHeaderBytes = 8;

// The bytes before a frame's payload in `format` (1 or 2).
constexpr size_t JournalFrameHeaderBytes(uint32_t format) {
  return format == 2 ? kJournalRecordHeaderBytes : kJournalFormat1RecordHeaderBytes;
}

// The format-2 file header.
std::string JournalFileHeader();

// Reads the frame of `format` (1 or 2) at `offset` of `data` into `record`: returns the frame's
// size, or 0 with *why saying what is wrong there. `offset` must lie within `data`.
size_t TryJournalFrame(absl::string_view data, size_t offset, uint32_t format,
                       v1::JournalRecord* record, std::string* why);

// Reads the format-2 frame at `offset` of `data` into `record`: returns the frame's size, or 0
// when no intact frame starts there (checked as a scan checks it).
size_t ReadJournalFrame(absl::string_view data, size_t offset, v1::JournalRecord* record);

// How many bytes the format-2 frame at `offset` of `data` spans by its header, for a reader
// that holds only part of a file (`offset` at most data.size()): kJournalRecordHeaderBytes
// while the header is not all there, 0 when the bytes there are no frame's header (no sync
// word, a length of 0 or over kMaxJournalRecordBytes). Says nothing of the payload's CRC.
size_t JournalFrameSpan(absl::string_view data, size_t offset);

// Appends one format-2 frame holding `payload` (a serialized JournalRecord) to `out`.
void AppendJournalFrame(absl::string_view payload, std::string* out);

// Appends the frame of JournalRecord{ranks {steps: [steps]}}, byte for byte what
// AppendJournalFrame(record.SerializeAsString()) appends, without building that record: the
// coordinator journals every RankSteps it accepts, and copying each into a record to serialize
// it cost an allocation and a copy of its strings.
void AppendRankStepsFrame(const v1::RankSteps& steps, std::string* out);

// Little-endian 32-bit words, as the framing stores them.
uint32_t LoadJournalLe32(const char* p);
void PutJournalLe32(std::string& out, uint32_t v);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_JOURNAL_JOURNAL_FRAME_H_
