#include "daemon/analyze/trace_reduce.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/wire/packed_steps.h"

namespace stagefrontier {
namespace {

using json = nlohmann::json;

constexpr absl::string_view kStepPrefix = "ProfilerStep#";
// Chrome traces are in microseconds; beyond this a time is not a plausible one.
constexpr double kMaxUs = 9.0e15;

struct Range {
  int64_t begin_ns;
  int64_t end_ns;
};

// A SAX consumer that only remembers where parsing failed.
struct ErrorPosition : nlohmann::json_sax<json> {
  size_t byte = 0;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    byte = position;
    return false;
  }
};

absl::Status Bad(const std::string& name, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(name, ": ", what));
}

// ts and dur of a complete event, in ns.
absl::StatusOr<Range> TimesOf(const json& e, const std::string& name, size_t index) {
  const auto ts = e.find("ts");
  const auto dur = e.find("dur");
  if (ts == e.end() || !ts->is_number() || dur == e.end() || !dur->is_number()) {
    return Bad(name, absl::StrCat("event ", index, " (\"", e.value("name", ""),
                                  "\") has no numeric \"ts\" and \"dur\""));
  }
  const double t = ts->get<double>();
  const double d = dur->get<double>();
  if (!std::isfinite(t) || !std::isfinite(d) || d < 0 || std::fabs(t) > kMaxUs || d > kMaxUs) {
    return Bad(name, absl::StrCat("event ", index, " (\"", e.value("name", ""),
                                  "\") has an implausible ts ", t, " or dur ", d));
  }
  const int64_t begin = std::llround(t * 1000.0);
  return Range{begin, begin + std::llround(d * 1000.0)};
}

}  // namespace

absl::StatusOr<RankTrace> ReduceChromeTrace(absl::string_view text, const StageSchema& schema,
                                            const std::string& name) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    // Find where it breaks, for the message (the non-throwing parse does not say).
    ErrorPosition sax;
    json::sax_parse(text.begin(), text.end(), &sax, nlohmann::detail::input_format_t::json,
                    /*strict=*/true);
    return Bad(name, absl::StrCat("not valid JSON at byte ", sax.byte,
                                  " (a Chrome trace JSON from torch.profiler is expected)"));
  }
  const json* events = nullptr;
  if (doc.is_array()) {
    events = &doc;
  } else if (doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array()) {
    events = &doc["traceEvents"];
  } else {
    return Bad(name, "no \"traceEvents\" array: not a Chrome trace");
  }
  RankTrace out;
  if (doc.is_object() && doc.contains("distributedInfo") && doc["distributedInfo"].is_object()) {
    const json& di = doc["distributedInfo"];
    if (di.contains("rank") && di["rank"].is_number_integer()) {
      out.rank = static_cast<int32_t>(std::clamp<int64_t>(di["rank"].get<int64_t>(), -1, 1 << 30));
    }
    if (di.contains("world_size") && di["world_size"].is_number_integer()) {
      out.world_size =
          static_cast<int32_t>(std::clamp<int64_t>(di["world_size"].get<int64_t>(), -1, 1 << 30));
    }
  }
  std::map<int64_t, Range> steps;
  std::vector<std::vector<Range>> stage_ranges(schema.size());
  for (const json& e : *events) {
    const size_t i = out.events++;
    if (!e.is_object()) return Bad(name, absl::StrCat("event ", i, " is not an object"));
    const auto ph = e.find("ph");
    const auto nm = e.find("name");
    if (ph == e.end() || !ph->is_string() || ph->get_ref<const std::string&>() != "X") continue;
    if (nm == e.end() || !nm->is_string()) continue;
    const std::string& event_name = nm->get_ref<const std::string&>();
    if (absl::StartsWith(event_name, kStepPrefix)) {
      int64_t step = 0;
      if (!absl::SimpleAtoi(absl::string_view(event_name).substr(kStepPrefix.size()), &step) ||
          step < 0) {
        return Bad(name, absl::StrCat("event ", i, ": \"", event_name,
                                      "\" does not end in a step number"));
      }
      absl::StatusOr<Range> r = TimesOf(e, name, i);
      if (!r.ok()) return r.status();
      steps[step] = *r;
    } else if (absl::StartsWith(event_name, kStageAnnotationPrefix)) {
      const absl::string_view stage =
          absl::string_view(event_name).substr(kStageAnnotationPrefix.size());
      std::optional<size_t> k = schema.Find(stage);
      if (!k) {
        ++out.unknown_stage_ranges;
        continue;
      }
      absl::StatusOr<Range> r = TimesOf(e, name, i);
      if (!r.ok()) return r.status();
      stage_ranges[*k].push_back(*r);
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

absl::StatusOr<TraceReduction> ReduceTraceFiles(const std::vector<std::string>& paths,
                                                const StageSchema& schema) {
  if (paths.empty()) return absl::InvalidArgumentError("no trace files");
  TraceReduction out;
  std::vector<RankTrace> traces;
  for (size_t i = 0; i < paths.size(); ++i) {
    std::ifstream in(paths[i], std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", paths[i]));
    std::stringstream buf;
    buf << in.rdbuf();
    const std::string text = buf.str();
    out.trace_bytes += text.size();
    absl::StatusOr<RankTrace> t = ReduceChromeTrace(text, schema, paths[i]);
    if (!t.ok()) return t.status();
    if (t->rank < 0) {
      t->rank = static_cast<int32_t>(i);
      out.notes.push_back(absl::StrCat(paths[i], " has no distributedInfo.rank: taken as rank ", i,
                                       " (its position)"));
    }
    if (t->unknown_stage_ranges > 0) {
      out.notes.push_back(absl::StrCat(paths[i], ": ", t->unknown_stage_ranges,
                                       " stage ranges name stages outside the schema; ignored"));
    }
    if (t->ranges_outside_steps > 0) {
      out.notes.push_back(absl::StrCat(paths[i], ": ", t->ranges_outside_steps,
                                       " stage ranges start outside every ProfilerStep; ignored"));
    }
    out.trace_events += t->events;
    traces.push_back(std::move(*t));
  }
  int32_t world = static_cast<int32_t>(paths.size());
  for (const RankTrace& t : traces) world = std::max(world, t.world_size);
  std::set<int32_t> seen;
  for (size_t i = 0; i < traces.size(); ++i) {
    if (traces[i].rank >= world) {
      return absl::InvalidArgumentError(
          absl::StrCat(paths[i], ": rank ", traces[i].rank, " is outside world size ", world));
    }
    if (!seen.insert(traces[i].rank).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(paths[i], ": a second trace of rank ", traces[i].rank));
    }
  }
  // The steps every trace holds.
  std::vector<int64_t> common;
  for (const auto& [step, b] : traces.front().steps) {
    if (std::all_of(traces.begin(), traces.end(),
                    [step = step](const RankTrace& t) { return t.steps.count(step) > 0; })) {
      common.push_back(step);
    }
  }
  if (common.empty()) return absl::InvalidArgumentError("the traces have no step in common");
  out.run.job = "trace";
  out.run.world_size = world;
  out.run.schema = schema;
  for (const RankTrace& t : traces) {
    wire::PackedStepsEncoder enc(static_cast<uint32_t>(schema.size()));
    std::vector<int64_t> d(schema.size());
    for (int64_t step : common) {
      const std::vector<int64_t>& b = t.steps.at(step);
      RankStep rs;
      rs.rank = t.rank;
      rs.boundaries_ns = b;
      out.run.steps[step].step = step;
      out.run.steps[step].ranks.push_back(std::move(rs));
      for (size_t k = 0; k < schema.size(); ++k) d[k] = b[k + 1] - b[k];
      enc.Add(step, d.data(), 0);
      ++out.run.records;
      ++out.rank_steps;
    }
    out.packed_bytes += enc.bytes().size();
  }
  if (world > static_cast<int32_t>(traces.size())) {
    out.notes.push_back(absl::StrCat(world - static_cast<int32_t>(traces.size()), " of ", world,
                                     " ranks have no trace: their steps are partial"));
  }
  return out;
}

}  // namespace stagefrontier
