// Capture analysis where a crash cannot hurt the caller. The traces a coordinator analyses
// were written by trainers' users; however the parser is bounded (chrome_trace.h), a defect
// left in it must not stop every job's ingest and queries. The analysis therefore runs in a
// child process started from the caller's own executable (posix_spawn, nothing inherited but
// a pipe), under hard limits on address space, CPU time and wall time; the parent reads one
// JSON answer from the pipe and turns every other ending — a signal, a limit, garbage, a hang —
// into an error that says what happened.
//
//   // First thing in main (the child is this very binary, asked by an argument):
//   if (std::optional<int> rc = RunCaptureAnalysisChildIfAsked(argc, argv)) return *rc;
//   ...
//   CaptureAnalyser analyse = ChildCaptureAnalyser({.executable = "/proc/self/exe"});
//   absl::StatusOr<CaptureAnalysis> a = analyse(suspect, references, schema, "forward");
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_ANALYSIS_CHILD_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_ANALYSIS_CHILD_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

// One operator comparison, as a capture report keeps it.
struct CaptureAnalysis {
  std::string report_json;  // OperatorReportJson, serialized
  std::string text;         // RenderOperatorReportText
};

using CaptureAnalyser = std::function<absl::StatusOr<CaptureAnalysis>(
    const std::string& suspect_path, const std::vector<std::string>& reference_paths,
    const StageSchema& schema, const std::string& stage)>;

// AnalyzeCaptureFiles on the caller's thread (tests, the command-line tool).
absl::StatusOr<CaptureAnalysis> AnalyseCaptureInProcess(
    const std::string& suspect_path, const std::vector<std::string>& reference_paths,
    const StageSchema& schema, const std::string& stage);

struct CaptureAnalysisChildOptions {
  // A binary whose main calls RunCaptureAnalysisChildIfAsked first ("/proc/self/exe").
  std::string executable = "/proc/self/exe";
  uint64_t max_memory_bytes = 8ULL << 30;             // RLIMIT_AS of the child
  uint64_t max_cpu_seconds = 600;                     // RLIMIT_CPU of the child
  std::chrono::milliseconds timeout{15 * 60 * 1000};  // wall time, then SIGKILL
  uint64_t max_answer_bytes = 64ULL << 20;            // what the parent reads back at most
};

// Each call spawns one child. Errors: Internal "the analysis crashed (signal N: name)",
// ResourceExhausted for the memory or CPU limit or the timeout, and the child's own error
// (InvalidArgument for a bad trace, NotFound for a missing file) with its code and message.
CaptureAnalyser ChildCaptureAnalyser(CaptureAnalysisChildOptions options);

// The child's side: when argv[1] is the child's marker, runs the analysis the arguments ask
// for, writes the answer on stdout and returns the exit code; std::nullopt otherwise.
std::optional<int> RunCaptureAnalysisChildIfAsked(int argc, char** argv);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_ANALYSIS_CHILD_H_
