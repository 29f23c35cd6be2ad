// The recorded-run format read by `stagefrontier analyze` and written by `stagefrontier-sim`:
// JSON Lines, one record per rank-step (docs/run-format.md describes it byte by byte).
//
//   {"job":"demo","world_size":16,"rank":3,"step":17,
//    "schema":[["data","io"],["forward","compute"]],"boundaries_ns":[100,2100,5100]}
//
//   absl::StatusOr<RecordedRun> run = ReadRunFile("run.jsonl");
//   if (!run.ok()) { /* message names the line and the field */ }
#ifndef STAGEFRONTIER_DAEMON_ANALYZE_RUN_FILE_H_
#define STAGEFRONTIER_DAEMON_ANALYZE_RUN_FILE_H_

#include <cstdint>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/accounting/step_input.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

struct RecordedRun {
  std::string job;
  int32_t world_size = 0;
  std::optional<StageSchema> schema;
  // Sync groups, when records carry "group"; empty otherwise.
  std::vector<std::vector<int32_t>> groups;
  // A journal's job with a declared layout: the groups are its roles ("pp1", "pp0.tp1"), named,
  // with each one's pipeline stage (as the coordinator builds them: JobConfig's fields).
  std::vector<std::string> group_names;
  std::vector<int32_t> group_pipeline_stages;
  std::map<int64_t, StepInput> steps;  // by step number, ranks in file order
  int64_t records = 0;
};

// Longest accepted line, in bytes.
inline constexpr size_t kMaxRunLineBytes = 1 << 20;

// Parses a whole run. Any malformed record fails the read with InvalidArgument
// "LINE N: field \"F\": what is wrong"; nothing partial is returned.
[[nodiscard]] absl::StatusOr<RecordedRun> ParseRun(std::istream& in);

// Opens and parses `path`; NotFound when it cannot be opened.
[[nodiscard]] absl::StatusOr<RecordedRun> ReadRunFile(const std::string& path);

// One record as a line (without the newline). `group` < 0 leaves the field out.
std::string FormatRunRecord(const std::string& job, int32_t world_size, const StageSchema& schema,
                            int64_t step, const RankStep& record, int32_t group = -1);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ANALYZE_RUN_FILE_H_
