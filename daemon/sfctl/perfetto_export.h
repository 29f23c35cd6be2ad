// A job's steps as a Chrome Trace Event Format document (JSON object format), to open in
// ui.perfetto.dev or chrome://tracing: what `sfctl export --format perfetto` writes
// (docs/cli.md). Pure: built from query replies, no I/O, so that it is unit-tested alone.
//
// Tracks (thread tracks of two processes):
//   * process "frontier" (pid 1): thread "steps", one slice per step as long as the step's
//     exposed time; thread "frontier", per step one slice per stage whose length is the
//     stage's frontier increment ΔF (docs/accounting.md), so that a step's slices sum to its
//     exposed time exactly; one thread per verdict group ("verdicts" for the job's, "verdicts
//     (G)" for sync group G), one slice per verdict window over the steps it covers, named
//     with its label and first suspect, args with the reason, explanation and suspects.
//   * process "ranks" (pid 2): thread "rank N" (tid N + 1) per rank with records, its stages
//     as slices.
// Time: a rank's stage durations are measured on its own clock, and the ranks' clocks are
// never compared (docs/accounting.md, "Per step: exact, integer, clock-free"), so the trace is
// ALIGNED AT STEP STARTS: steps are laid end to end
// from 0, each as long as its exposed time (the longest rank's), every track starts the step
// at the same time, and within it each rank's slices follow its own recorded durations. Gaps
// between steps are not shown. The document's "metadata" says so too. ts and dur are
// microseconds with nanosecond fractions; every slice's args carry its step.
//
//   PerfettoExportInput in;
//   in.job = "run42"; in.from_step = 100; in.to_step = 200;
//   in.steps = get_steps_reply; in.ranks = get_rank_steps_reply;
//   for (const v1::VerdictEvent& ev : held) in.verdicts.push_back(ev.verdict());
//   absl::StatusOr<std::string> json = BuildPerfettoTrace(in);
#ifndef STAGEFRONTIER_DAEMON_SFCTL_PERFETTO_EXPORT_H_
#define STAGEFRONTIER_DAEMON_SFCTL_PERFETTO_EXPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

inline constexpr int kFrontierPid = 1;
inline constexpr int kRanksPid = 2;
inline constexpr int kStepsTid = 1;
inline constexpr int kFrontierTid = 2;
inline constexpr int kFirstVerdictTid = 3;  // one per verdict group, "job" first

struct PerfettoExportInput {
  std::string job;
  int64_t from_step = 0;  // the range asked (the metadata says it)
  // Unset when no --to was given: the metadata's to_step is then the last step exported
  // (a sentinel like INT64_MAX means nothing to a reader of the file).
  std::optional<int64_t> to_step;
  v1::GetStepsReply steps;            // the accounting: exposed time, ΔF per stage
  v1::GetRankStepsReply ranks;        // each rank's recorded stage durations
  std::vector<v1::Verdict> verdicts;  // windows not overlapping the steps are left out
};

// The trace as one JSON document ({"traceEvents": [...], "displayTimeUnit": "ms",
// "metadata": {...}}), steps being the union of those in either reply. Returns it, or
// InvalidArgument naming the step when the replies disagree or are malformed: different
// stage lists, a step or record whose stage count differs from the stages', a negative
// duration or increment, steps not in increasing order.
[[nodiscard]] absl::StatusOr<std::string> BuildPerfettoTrace(const PerfettoExportInput& input);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SFCTL_PERFETTO_EXPORT_H_
