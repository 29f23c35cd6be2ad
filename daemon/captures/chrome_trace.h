// Reads a Chrome trace (the JSON torch.profiler / Kineto exports) into its complete events:
// the one parser behind `stagefrontier reduce-trace` (stages per step) and the operator
// comparison of captures (operators inside a stage).
//
//   absl::StatusOr<ChromeTrace> t = ParseChromeTrace(text, "trace_rank3.json");
//   if (!t.ok()) { std::cerr << t.status().message(); }  // names the file and what is wrong
//   for (const TraceEvent& e : t->events) { ... e.name, e.begin_ns, e.end_ns ... }
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CHROME_TRACE_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CHROME_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stagefrontier {

// One complete ("ph":"X") event. Times are the trace's microseconds in ns.
struct TraceEvent {
  std::string name;
  std::string category;  // "cat": cpu_op, user_annotation, python_function, kernel, ...
  std::string process;   // "pid" as written (a number or a name)
  std::string thread;    // "tid" as written
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
};

struct ChromeTrace {
  int32_t rank = -1;               // distributedInfo.rank; -1 if the trace does not say
  int32_t world_size = -1;         // distributedInfo.world_size; likewise
  std::vector<TraceEvent> events;  // complete events with a string name, in file order
  uint64_t all_events = 0;         // every entry of the event list
};

// What one trace may cost to parse. A trace is written by a trainer's user: whatever it holds
// must neither exhaust the parser's stack nor its memory beyond these.
struct TraceParseLimits {
  uint64_t max_bytes = 512ULL << 20;  // the capture store keeps files of at most 256 MiB
  int max_depth = 64;                 // torch.profiler writes 4 levels; "args" add a few
  uint64_t max_events = 20'000'000;   // entries of the event list
};

// Parses `text`, a top-level object with "traceEvents" (or a bare event array). Fails with
// InvalidArgument starting with `name`: not JSON (with the byte offset), no event list, an
// entry that is not an object, or a complete event whose ts/dur is missing, not a number,
// negative or implausible. Events of other phases, and complete events without a string
// name, are counted in all_events and otherwise skipped. A trace beyond `limits` (larger,
// nested deeper, more events) fails with ResourceExhausted naming the limit; parsing is never
// recursive, so no nesting can overflow the stack.
[[nodiscard]] absl::StatusOr<ChromeTrace> ParseChromeTrace(
    absl::string_view text, const std::string& name,
    const TraceParseLimits& limits = TraceParseLimits{});

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CHROME_TRACE_H_
