// From captured trace files to the operator report: reads the suspect's and the reference
// ranks' traces, profiles one stage in each and compares them (operator_compare.h). What
// `stagefrontier compare-ops` runs, and what the coordinator will run on collected captures.
//
//   absl::StatusOr<OperatorReport> r = AnalyzeCaptureFiles(
//       "trace_rank11.json", {"trace_rank2.json", "trace_rank5.json"}, schema, "data");
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_ANALYSIS_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_ANALYSIS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/captures/operator_compare.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

// Fails with NotFound for a file that cannot be read, InvalidArgument (naming the file) for a
// malformed trace or one without the stage, and as CompareOperators otherwise. A trace without
// distributedInfo.rank (torch builds without Kineto write none) takes N from "rank<N>" in its
// file name, else -1; the notes say which.
[[nodiscard]] absl::StatusOr<OperatorReport> AnalyzeCaptureFiles(
    const std::string& suspect_path, const std::vector<std::string>& reference_paths,
    const StageSchema& schema, const std::string& stage,
    const CompareOptions& options = CompareOptions{});

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_ANALYSIS_H_
