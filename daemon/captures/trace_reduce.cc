#include "daemon/captures/trace_reduce.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace stagefrontier {
namespace {

constexpr absl::string_view kStepPrefix = "ProfilerStep#";

struct Range {
  int64_t begin_ns;
  int64_t end_ns;
};

absl::Status Bad(const std::string& name, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(name, ": ", what));
}

}  // namespace

absl::StatusOr<RankTrace> ReduceChromeTrace(absl::string_view text, const StageSchema& schema,
                                            const std::string& name) {
  absl::StatusOr<ChromeTrace> trace = ParseChromeTrace(text, name);
  if (!trace.ok()) return trace.status();
  return ReduceParsedTrace(*trace, schema, name);
}

absl::StatusOr<RankTrace> ReduceParsedTrace(const ChromeTrace& trace, const StageSchema& schema,
                                            const std::string& name) {
  RankTrace out;
  out.rank = trace.rank;
  out.world_size = trace.world_size;
  out.events = trace.all_events;
  std::map<int64_t, Range> steps;
  std::vector<std::vector<Range>> stage_ranges(schema.size());
  for (const TraceEvent& e : trace.events) {
    const std::string& event_name = e.name;
    if (absl::StartsWith(event_name, kStepPrefix)) {
      int64_t step = 0;
      if (!absl::SimpleAtoi(absl::string_view(event_name).substr(kStepPrefix.size()), &step) ||
          step < 0) {
        return Bad(name, absl::StrCat("event \"", event_name, "\" does not end in a step number"));
      }
      steps[step] = Range{e.begin_ns, e.end_ns};
      out.step_process = e.process;
    } else if (absl::StartsWith(event_name, kStageAnnotationPrefix)) {
      const absl::string_view stage =
          absl::string_view(event_name).substr(kStageAnnotationPrefix.size());
      std::optional<size_t> k = schema.Find(stage);
      if (!k) {
        ++out.unknown_stage_ranges;
        continue;
      }
      stage_ranges[*k].push_back(Range{e.begin_ns, e.end_ns});
    }
  }
  if (steps.empty()) {
    return Bad(name,
               "no \"ProfilerStep#N\" events: profile with torch.profiler and call prof.step() "
               "once per iteration");
  }
  size_t annotated = 0;
  for (const auto& v : stage_ranges) annotated += v.size();
  if (annotated == 0) {
    return Bad(name, absl::StrCat("no \"", kStageAnnotationPrefix,
                                  "<stage>\" ranges for the schema ", schema.ToString(),
                                  ": run the trainer with stagefrontier.torch --annotate (or "
                                  "STAGEFRONTIER_TORCH_ANNOTATE=1) while profiling"));
  }
  // Each stage range belongs to the step it starts in (steps sorted by start time); a stage
  // ends where its last range in the step ends.
  const size_t S = schema.size();
  struct StepSpan {
    int64_t step;
    Range range;
    std::vector<int64_t> stage_end;  // INT64_MIN: no range of that stage in this step
  };
  std::vector<StepSpan> by_time;
  for (const auto& [step, r] : steps) {
    by_time.push_back({step, r, std::vector<int64_t>(S, INT64_MIN)});
  }
  std::sort(by_time.begin(), by_time.end(), [](const StepSpan& a, const StepSpan& b) {
    return a.range.begin_ns < b.range.begin_ns;
  });
  for (size_t k = 0; k < S; ++k) {
    for (const Range& r : stage_ranges[k]) {
      auto it = std::upper_bound(by_time.begin(), by_time.end(), r.begin_ns,
                                 [](int64_t t, const StepSpan& s) { return t < s.range.begin_ns; });
      if (it == by_time.begin() || r.begin_ns >= std::prev(it)->range.end_ns) {
        ++out.ranges_outside_steps;
        continue;
      }
      int64_t& e = std::prev(it)->stage_end[k];
      e = std::max(e, r.end_ns);
    }
  }
  for (const StepSpan& s : by_time) {
    std::vector<int64_t> b(S + 1);
    b[0] = s.range.begin_ns;
    for (size_t k = 0; k < S; ++k) b[k + 1] = std::max(b[k], s.stage_end[k]);
    out.steps[s.step] = std::move(b);
  }
  return out;
}

}  // namespace stagefrontier
