// Compacts a coordinator journal (docs/journal-format.md) into a new one whose records after the
// declaration travel in record blocks (record_block.h): the same records, in the same order,
// several times smaller. The coordinator and `stagefrontier journal` read either file and
// rebuild the same state. The original is never modified; the new file is created atomically
// and read back and compared record by record before this reports success (with a duration
// unit above 1: the same records but for durations rounded by at most half a unit).
//
//   absl::StatusOr<CompactionReport> r =
//       CompactJournal("/data/run42.journal", "/archive/run42.journal", {});
//   if (r.ok()) std::cout << r->output_bytes << " bytes\n";
#ifndef STAGEFRONTIER_DAEMON_JOURNAL_JOURNAL_COMPACTION_H_
#define STAGEFRONTIER_DAEMON_JOURNAL_JOURNAL_COMPACTION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/archive/record_block.h"

namespace stagefrontier {

struct CompactionOptions {
  uint32_t block_steps = 100;  // a block ends after this many closed steps (a verdict window)
  int zstd_level = 12;
  // 1: exact (the default). 1000: durations rounded to the nearest microsecond — a lossy
  // archive (each stage of a replayed step differs by at most half a unit); only the step
  // records taken into columns are rounded.
  int64_t duration_unit_ns = 1;
  bool fsync = true;
};

struct CompactionReport {
  std::string job;
  uint32_t stages = 0;
  uint64_t input_bytes = 0;   // the original file
  uint64_t output_bytes = 0;  // the compacted file
  uint64_t blocks = 0;
  RecordBlockStats totals;       // summed over the blocks
  double encode_seconds = 0;     // building the blocks
  double read_back_seconds = 0;  // reading the new file back (decoding every block)
};

// Writes the compacted copy of the journal at `input` to `output`. Fails with NotFound when
// `input` cannot be read; FailedPrecondition when it is not a journal, is of an unknown
// format, has damaged regions (let a coordinator repair it first: docs/journal-format.md,
// "Recovery"), or its first record is not the declaration; AlreadyExists when `output`
// exists; with the errno-derived status when `output` cannot be written; with Internal if
// reading the new file back does not give the same records (the new file is removed then).
[[nodiscard]] absl::StatusOr<CompactionReport> CompactJournal(const std::string& input,
                                                              const std::string& output,
                                                              const CompactionOptions& options);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_JOURNAL_JOURNAL_COMPACTION_H_
