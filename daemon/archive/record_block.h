// A record block: many journal records (docs/journal-format.md) in one compact, exact unit.
// The step records (`RanksLogged`, `StepClosed`) are taken apart into columns — rank and step
// numbers as deltas, each (rank, stage)'s durations as deltas over time — and the columns are
// compressed with zstd; every other record travels whole. Decoding gives back the same records,
// byte for byte when serialized: a journal whose records were moved into blocks replays to
// exactly the state the original did. Byte layout: docs/journal-format.md, "Record blocks".
//
//   RecordBlockStats stats;
//   absl::StatusOr<std::string> block =
//       EncodeRecordBlock(records, {.stage_count = 6}, &stats);   // records: a closed window's
//   v1::JournalRecord r; r.set_block(*block);                      // one record in the journal
//   absl::Status s = DecodeRecordBlock(r.block(), [&](const v1::JournalRecord& each) {
//     return state.Replay(each);
//   });
//
// Versioned (NCCL-plugin style): version 1 is frozen; a reader refuses a block of a version it
// does not know with a message saying so, and never guesses.
#ifndef STAGEFRONTIER_DAEMON_ARCHIVE_RECORD_BLOCK_H_
#define STAGEFRONTIER_DAEMON_ARCHIVE_RECORD_BLOCK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "stagefrontier/v1/journal.pb.h"

namespace stagefrontier {

inline constexpr uint8_t kRecordBlockVersion = 1;
// Bounds a reader enforces before it allocates (a block is at most a journal record, 64 MiB).
inline constexpr uint64_t kMaxRecordBlockRawBytes = 32ULL << 20;  // the columns, uncompressed
inline constexpr uint64_t kMaxRecordBlockRecords = 1 << 22;
inline constexpr int64_t kMaxRecordBlockUnitNs = 1'000'000;

struct RecordBlockOptions {
  uint32_t stage_count = 0;  // the job's declared stages (1 .. shm::v1::kMaxStages)
  int zstd_level = 12;       // 1 (fast) .. 19 (small)
  // 1: exact. Above 1 (1000: microseconds) the durations of the step records taken into
  // columns are rounded to the nearest multiple: lossy, for cold archives.
  int64_t duration_unit_ns = 1;
};

// What went into a block, for the figures a compaction prints.
struct RecordBlockStats {
  uint64_t records = 0;
  uint64_t whole_records = 0;     // records that travel whole (not step records, or not canonical)
  uint64_t rank_steps = 0;        // rank-steps taken apart into columns
  uint64_t rank_stage_steps = 0;  // rank_steps x stages
  uint64_t input_bytes = 0;       // the records' serialized sizes, summed
  uint64_t column_bytes = 0;      // the columns before zstd
  uint64_t block_bytes = 0;       // the block
};

// Encodes `records`, in order, into one block. A step record goes into the columns only when
// rebuilding it from them gives its exact serialized bytes (no probe intervals, no unknown
// fields, canonical packed steps of `stage_count` stages) — with a duration unit above 1, the
// bytes it has once its durations are rounded; any other record travels whole, unchanged.
// Fails with InvalidArgument for a record that is itself a block, no records, a stage count
// outside 1..kMaxStages, a unit outside 1..kMaxRecordBlockUnitNs, or more than
// kMaxRecordBlockRecords records or kMaxRecordBlockRawBytes of columns; with Internal when
// zstd fails.
[[nodiscard]] absl::StatusOr<std::string> EncodeRecordBlock(
    const std::vector<v1::JournalRecord>& records, const RecordBlockOptions& options,
    RecordBlockStats* stats = nullptr);

// What a block says of itself.
struct RecordBlockInfo {
  uint32_t stage_count = 0;
  int64_t duration_unit_ns = 0;
  uint64_t records = 0;
};

// Decodes `block`, calling `sink` with each record in order (and filling `info` when given); stops
// at the first status `sink` returns that is not OK and returns it. Fails with FailedPrecondition
// for a version this build does not know ("record block version N is newer ..."), and with
// InvalidArgument naming what is wrong for anything malformed (bad zstd frame, sizes over the
// bounds above, a column cut short or with bytes left over, a value out of range); no record is
// passed to `sink` before the whole block has been checked. Never reads outside `block`.
[[nodiscard]] absl::Status DecodeRecordBlock(
    absl::string_view block, absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink,
    RecordBlockInfo* info = nullptr);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ARCHIVE_RECORD_BLOCK_H_
