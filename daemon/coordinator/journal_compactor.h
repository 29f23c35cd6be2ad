// Compaction of a live job's journal, while the coordinator runs: the plain records written
// since the last compaction move into record blocks (daemon/archive/record_block.h, exact, ~3x
// smaller), the file is replaced atomically, and appending never stops. Restores replay the
// compacted journal to the same state (docs/journal-format.md "Compaction while running").
//
//   JournalCompactorOptions o{.min_plain_bytes = 64 << 20};
//   absl::StatusOr<JournalCompaction> done = CompactLiveJournal(journal, /*stages=*/6, o);
//   if (done.ok() && done->records > 0) log(done->Describe());
//
// One compaction of a journal at a time (the coordinator runs them on one thread).
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_JOURNAL_COMPACTOR_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_JOURNAL_COMPACTOR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/coordinator/job_journal.h"

namespace stagefrontier {

struct JournalCompactorOptions {
  uint64_t min_plain_bytes = 64ULL << 20;    // compact once this many bytes of plain records
  uint64_t max_region_bytes = 256ULL << 20;  // at most this many of them per compaction
  // ... and once the plain records reach this fraction of the compacted prefix, taking up to
  // twice that: each compaction copies the prefix, so its copying stays within 1/fraction bytes
  // per plain byte compacted however long the job runs (at the cost of a plain tail up to this
  // fraction of the prefix). 0: min_plain_bytes alone.
  double prefix_fraction = 0.25;
  uint32_t block_steps = 100;                // a block ends after this many closed steps
  int zstd_level = 3;
  // Decode and compare the first block and every Nth after it (RecordBlockBuilder): checking
  // all cost about a quarter of building them (tests/bench:record_block_builder_benchmark).
  uint32_t verify_every = 8;
  // The region is read, and its blocks written, through a buffer of about this many bytes
  // (a frame longer than it is read whole).
  size_t io_chunk_bytes = 8 << 20;
};

struct JournalCompaction {
  uint64_t records = 0;  // plain records moved into blocks (0: nothing was due)
  uint64_t blocks = 0;
  uint64_t file_bytes_before = 0;
  uint64_t file_bytes_after = 0;  // what the region became, plus the bytes around it
  double seconds = 0;
  std::string Describe() const;
};

// Compacts the plain records of `journal` written so far (from the end of its compacted
// prefix) when they are due (min_plain_bytes, and prefix_fraction of the prefix; at most
// max_region_bytes of them, or twice what was due): builds a new file beside the journal (a
// hidden `.<job>.journal.compacting-…`, removed at the next start if a crash leaves it) holding
// the compacted prefix, then the new blocks (the first and every verify_every-th checked to
// decode to its records), synced when the journal is, and hands it to
// RecordLog::ReplacePrefix. Returns records == 0
// when nothing was due. Fails, leaving the journal as it was, with the errno-derived status of
// a failed call, DataLoss for a region that does not scan as intact frames, or as
// EncodeRecordBlock and ReplacePrefix.
[[nodiscard]] absl::StatusOr<JournalCompaction> CompactLiveJournal(
    JobJournal& journal, uint32_t stage_count, const JournalCompactorOptions& options);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_JOURNAL_COMPACTOR_H_
