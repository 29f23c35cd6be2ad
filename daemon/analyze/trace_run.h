// Reduces the Chrome traces of a run, one file per rank, to the recorded run `stagefrontier
// analyze` reads (`stagefrontier reduce-trace`, docs/cli.md): each file as ReduceChromeTrace
// (daemon/captures/trace_reduce.h) says, then the steps every rank's trace holds.
//
//   absl::StatusOr<TraceReduction> r = ReduceTraceFiles({"a.json", "b.json"}, schema);
//   Analyze(r->run);   // the same RecordedRun `stagefrontier analyze` reads
#ifndef STAGEFRONTIER_DAEMON_ANALYZE_TRACE_RUN_H_
#define STAGEFRONTIER_DAEMON_ANALYZE_TRACE_RUN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/analyze/run_file.h"
#include "daemon/captures/trace_reduce.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

struct TraceReduction {
  RecordedRun run;           // job "trace", the steps every rank's trace holds
  uint64_t trace_bytes = 0;  // the files' sizes
  uint64_t trace_events = 0;
  uint64_t packed_bytes = 0;  // StageFrontier's packed step vectors for the same rank-steps
  int64_t rank_steps = 0;
  std::vector<std::string> notes;  // what was left out, and why
};

// Reads and reduces one file per rank. A file without distributedInfo takes its position in
// `paths` as its rank (said in the notes). Fails as ReduceChromeTrace, NotFound for a file
// that cannot be read, InvalidArgument for two files of one rank, a rank outside the world
// size, or no step common to all files.
[[nodiscard]] absl::StatusOr<TraceReduction> ReduceTraceFiles(const std::vector<std::string>& paths,
                                                              const StageSchema& schema);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ANALYZE_TRACE_RUN_H_
