#include "daemon/captures/operator_profile.h"

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/captures/trace_reduce.h"

namespace stagefrontier {
namespace {

struct Span {
  int64_t begin_ns;
  int64_t end_ns;
  size_t step_index;
};

// Events that delimit steps and stages, not operators.
bool IsFrame(const TraceEvent& e) {
  return absl::StartsWith(e.name, "ProfilerStep#") ||
         absl::StartsWith(e.name, kStageAnnotationPrefix);
}

// An enclosing event on a thread's stack, with the last operator that ended under it.
struct Open {
  const TraceEvent* event;
  std::string path;  // "" for a frame or an event outside every span
  std::string last_child;
  int64_t last_child_begin_ns = -1;
};

}  // namespace

absl::StatusOr<OperatorProfile> ProfileOperators(const ChromeTrace& trace,
                                                 const StageSchema& schema,
                                                 const std::string& stage,
                                                 const std::string& name) {
  const std::optional<size_t> k = schema.Find(stage);
  if (!k) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": stage \"", stage, "\" is not in the schema ", schema.ToString()));
  }
  absl::StatusOr<RankTrace> reduced = ReduceParsedTrace(trace, schema, name);
  if (!reduced.ok()) return reduced.status();
  OperatorProfile out;
  out.rank = trace.rank;
  out.stage = stage;
  std::vector<Span> spans;
  for (const auto& [step, b] : reduced->steps) {
    if (b[*k + 1] <= b[*k]) continue;
    spans.push_back({b[*k], b[*k + 1], out.steps.size()});
    out.steps.push_back(step);
    out.stage_duration_ns.push_back(b[*k + 1] - b[*k]);
  }
  if (spans.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": stage \"", stage, "\" never lasted in a captured step"));
  }
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin_ns < b.begin_ns; });
  // The span an instant falls in, if any.
  auto span_of = [&](int64_t t) -> const Span* {
    auto it = std::upper_bound(spans.begin(), spans.end(), t,
                               [](int64_t v, const Span& s) { return v < s.begin_ns; });
    if (it == spans.begin()) return nullptr;
    --it;
    return t < it->end_ns ? &*it : nullptr;
  };

  // The trainer's events, by thread, in start order (an enclosing event before its children).
  std::map<std::string, std::vector<const TraceEvent*>> threads;
  for (const TraceEvent& e : trace.events) {
    if (e.process == reduced->step_process) threads[e.thread].push_back(&e);
  }
  for (auto& [thread, events] : threads) {
    std::stable_sort(events.begin(), events.end(), [](const TraceEvent* a, const TraceEvent* b) {
      return a->begin_ns != b->begin_ns ? a->begin_ns < b->begin_ns : a->end_ns > b->end_ns;
    });
    std::vector<Open> stack;
    Open root{nullptr, "", "", -1};
    for (const TraceEvent* e : events) {
      while (!stack.empty() && stack.back().event->end_ns <= e->begin_ns) stack.pop_back();
      const Span* span = span_of(e->begin_ns);
      if (IsFrame(*e) || span == nullptr) {
        stack.push_back({e, "", "", -1});
        continue;
      }
      Open& parent = stack.empty() ? root : stack.back();
      // The enclosing operator's path, when it began inside the same span.
      const bool nested = !parent.path.empty() && parent.event->begin_ns >= span->begin_ns;
      std::string path = nested ? absl::StrCat(parent.path, kCallPathSeparator, e->name) : e->name;
      std::vector<OperatorStep>& by_step = out.operators[path];
      if (by_step.empty()) by_step.resize(out.steps.size());
      OperatorStep& op = by_step[span->step_index];
      const int64_t begin = e->begin_ns - span->begin_ns;
      const int64_t end = e->end_ns - span->begin_ns;
      if (op.occurrences == 0) {
        op.begin_ns = begin;
        op.predecessor = parent.last_child_begin_ns >= span->begin_ns ? parent.last_child : "";
      }
      op.end_ns = std::max(op.end_ns, end);
      op.duration_ns += e->end_ns - e->begin_ns;
      ++op.occurrences;
      parent.last_child = path;
      parent.last_child_begin_ns = e->begin_ns;
      stack.push_back({e, std::move(path), "", -1});
    }
  }
  return out;
}

}  // namespace stagefrontier
