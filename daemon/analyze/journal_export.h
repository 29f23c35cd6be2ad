// Reads a coordinator journal (docs/journal-format.md) as a recorded run, without changing
// the file: every intact record is used, damaged bytes are skipped (and said). With
// `stagefrontier journal`, a finished (or damaged, or kept-aside) job is accounted offline by
// the same engine, or written out as a run file (docs/run-format.md).
//
//   absl::StatusOr<JournalRun> run = ReadJournalAsRun("/var/lib/stagefrontier/run42.journal");
//   if (run.ok()) for (const auto& [step, input] : run->run.steps) engine->AddStep(input);
#ifndef STAGEFRONTIER_DAEMON_ANALYZE_JOURNAL_EXPORT_H_
#define STAGEFRONTIER_DAEMON_ANALYZE_JOURNAL_EXPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/analyze/run_file.h"

namespace stagefrontier {

struct JournalRun {
  RecordedRun run;
  uint64_t journal_records = 0;
  uint64_t skipped_bytes = 0;       // damaged bytes the scan skipped
  uint64_t refused_rank_steps = 0;  // logged rank-steps that do not decode
  std::vector<std::string> notes;   // one line per skipped region, etc.
};

// NotFound when the file cannot be read; InvalidArgument when it is not a journal, of an
// unknown format, or its declaration is lost.
[[nodiscard]] absl::StatusOr<JournalRun> ReadJournalAsRun(const std::string& path);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ANALYZE_JOURNAL_EXPORT_H_
