#include "daemon/sfctl/perfetto_export.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace stagefrontier {
namespace {

using Json = nlohmann::ordered_json;

constexpr char kClockNote[] =
    "Aligned at step starts. Each rank's stage durations are measured on that rank's own "
    "monotonic clock and the ranks' clocks are never compared, so every step starts at the same "
    "time on every track: steps are laid end to end from 0, each as long as its exposed time "
    "(the frontier F[S], the longest rank's step), and within a step each rank's slices follow "
    "its own recorded durations from its step start. Time between steps is not shown; ts and "
    "dur are microseconds with nanosecond fractions.";
constexpr char kFrontierNote[] =
    "Track 'frontier': per step, one slice per stage as long as the stage's frontier increment "
    "dF[k] = F[k] - F[k-1] (docs/accounting.md); a step's slices sum to its exposed time. Track "
    "'steps': one slice per step. Tracks 'verdicts': one slice per verdict window over the "
    "exported steps it covers.";

// One step on the common time line.
struct Span {
  int64_t step = 0;
  int64_t start_ns = 0;
  int64_t length_ns = 0;
  const v1::StepSummary* summary = nullptr;
  const v1::StepRecords* records = nullptr;
};

double Us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

Json Event(const std::string& name, const char* cat, int pid, int tid, int64_t start_ns,
           int64_t dur_ns, Json args) {
  Json e;
  e["name"] = name;
  e["cat"] = cat;
  e["ph"] = "X";
  e["ts"] = Us(start_ns);
  e["dur"] = Us(dur_ns);
  e["pid"] = pid;
  e["tid"] = tid;
  e["args"] = std::move(args);
  return e;
}

Json Metadata(const char* name, int pid, int tid, Json args) {
  Json e;
  e["name"] = name;
  e["ph"] = "M";
  e["ts"] = 0;
  e["pid"] = pid;
  e["tid"] = tid;
  e["args"] = std::move(args);
  return e;
}

void NameThread(Json* events, int pid, int tid, const std::string& name, int sort_index) {
  events->push_back(Metadata("thread_name", pid, tid, Json{{"name", name}}));
  events->push_back(Metadata("thread_sort_index", pid, tid, Json{{"sort_index", sort_index}}));
}

const char* KindName(v1::StageKind kind) {
  switch (kind) {
    case v1::STAGE_KIND_IO:
      return "io";
    case v1::STAGE_KIND_COMPUTE:
      return "compute";
    case v1::STAGE_KIND_SYNC:
      return "sync";
    case v1::STAGE_KIND_MIXED:
      return "mixed";
    case v1::STAGE_KIND_P2P:
      return "p2p";
    case v1::STAGE_KIND_TENSOR:
      return "tensor";
    default:
      return "unknown";
  }
}

std::string VerdictName(const v1::Verdict& v) {
  std::string name = v.label().empty() ? "verdict" : v.label();
  if (!v.reason().empty()) absl::StrAppend(&name, " ", v.reason());
  if (v.label() != "HEALTHY" && !v.suspects().empty()) {
    absl::StrAppend(&name, ": ", v.suspects(0).stage(), " on rank ", v.suspects(0).rank());
  }
  if (v.group_wide()) absl::StrAppend(&name, " (group-wide)");
  return name;
}

Json VerdictArgs(const v1::Verdict& v, bool clipped) {
  Json suspects = Json::array();
  for (const v1::Suspect& s : v.suspects()) {
    suspects.push_back(Json{{"stage", s.stage()},
                            {"rank", s.rank()},
                            {"excess_ns", s.excess_ns()},
                            {"share", s.share()},
                            {"flagged_steps", s.flagged_steps()},
                            {"what_if_saving_ns", s.what_if_saving_ns()}});
  }
  Json args;
  args["group"] = v.group();
  args["first_step"] = v.first_step();
  args["last_step"] = v.last_step();
  args["steps"] = v.steps();
  // Profiled steps inside the span are left out of the evidence: the window spans more steps
  // than it has, and says so.
  args["profiled_steps_left_out"] = v.profiled_steps_left_out();
  args["window"] =
      v.profiled_steps_left_out() > 0
          ? absl::StrCat("window of ", v.steps(), " steps (", v.first_step(), "..", v.last_step(),
                         "; ", v.profiled_steps_left_out(), " profiled step",
                         v.profiled_steps_left_out() == 1 ? "" : "s", " left out)")
          : absl::StrCat("window of ", v.steps(), " steps");
  args["label"] = v.label();
  args["reason"] = v.reason();
  args["group_wide"] = v.group_wide();
  args["explanation"] = v.explanation();
  args["settle"] = v.settle();
  args["suspects"] = std::move(suspects);
  args["candidate_ranks"] =
      std::vector<int32_t>(v.candidate_ranks().begin(), v.candidate_ranks().end());
  args["candidate_stages"] =
      std::vector<std::string>(v.candidate_stages().begin(), v.candidate_stages().end());
  args["exposed_ns"] = v.exposed_ns();
  args["total_excess_ns"] = v.total_excess_ns();
  args["flagged_steps"] = v.flagged_steps();
  args["unreliable"] = std::vector<std::string>(v.unreliable().begin(), v.unreliable().end());
  // The window reaches beyond the exported steps: the slice shows only the part exported.
  args["clipped"] = clipped;
  return args;
}

absl::Status Bad(int64_t step, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("step ", step, ": ", what));
}

// The stage names both replies must agree on; the rank records' list when they carry one.
absl::StatusOr<std::vector<std::string>> StageNames(const PerfettoExportInput& in) {
  std::vector<std::string> stages;
  if (in.ranks.stages_size() > 0) {
    for (const v1::Stage& s : in.ranks.stages()) stages.push_back(s.name());
  } else {
    stages.assign(in.steps.stages().begin(), in.steps.stages().end());
  }
  if (in.steps.stages_size() > 0 && in.ranks.stages_size() > 0) {
    const std::vector<std::string> accounted(in.steps.stages().begin(), in.steps.stages().end());
    if (accounted != stages) {
      return absl::InvalidArgumentError(
          "the step accounting and the rank records name different stages");
    }
  }
  return stages;
}

// Checks the accounted steps (n stages each) and makes each step at least as long as its
// exposed time and its increments.
absl::Status AddAccountedSteps(const v1::GetStepsReply& steps, size_t n,
                               std::map<int64_t, Span>* by_step) {
  int64_t previous = INT64_MIN;
  for (const v1::StepSummary& s : steps.steps()) {
    if (s.step() <= previous) return Bad(s.step(), "accounted steps are not in increasing order");
    previous = s.step();
    if (static_cast<size_t>(s.stages_size()) != n) {
      return Bad(s.step(), absl::StrCat("accounting holds ", s.stages_size(), " stages, not ", n));
    }
    if (s.exposed_ns() < 0) return Bad(s.step(), "negative exposed time");
    int64_t sum = 0;
    for (const v1::StageStep& k : s.stages()) {
      if (k.increment_ns() < 0) return Bad(s.step(), "negative frontier increment");
      sum += k.increment_ns();
    }
    Span& span = (*by_step)[s.step()];
    span.step = s.step();
    span.summary = &s;
    span.length_ns = std::max({span.length_ns, s.exposed_ns(), sum});
  }
  return absl::OkStatus();
}

// Checks the rank records (n durations each) and makes each step at least as long as its
// longest rank's.
absl::Status AddRankRecords(const v1::GetRankStepsReply& ranks, size_t n,
                            std::map<int64_t, Span>* by_step) {
  int64_t previous = INT64_MIN;
  for (const v1::StepRecords& s : ranks.steps()) {
    if (s.step() <= previous) return Bad(s.step(), "rank records are not in increasing order");
    previous = s.step();
    Span& span = (*by_step)[s.step()];
    span.step = s.step();
    span.records = &s;
    int32_t previous_rank = -1;
    for (const v1::RankRecord& r : s.ranks()) {
      if (r.rank() <= previous_rank) {
        return Bad(s.step(), "rank records are not in increasing rank order");
      }
      previous_rank = r.rank();
      if (static_cast<size_t>(r.durations_ns_size()) != n) {
        return Bad(s.step(), absl::StrCat("rank ", r.rank(), " has ", r.durations_ns_size(),
                                          " stage durations, not ", n));
      }
      int64_t total = 0;
      for (int64_t d : r.durations_ns()) {
        if (d < 0) return Bad(s.step(), absl::StrCat("rank ", r.rank(), ": negative duration"));
        total += d;
      }
      span.length_ns = std::max(span.length_ns, total);
    }
  }
  return absl::OkStatus();
}

// Checks the replies and lays their steps end to end.
absl::StatusOr<std::vector<Span>> Layout(const PerfettoExportInput& in,
                                         std::vector<std::string>* stages) {
  absl::StatusOr<std::vector<std::string>> names = StageNames(in);
  if (!names.ok()) return names.status();
  *stages = *std::move(names);
  std::map<int64_t, Span> by_step;
  if (absl::Status s = AddAccountedSteps(in.steps, stages->size(), &by_step); !s.ok()) return s;
  if (absl::Status s = AddRankRecords(in.ranks, stages->size(), &by_step); !s.ok()) return s;
  std::vector<Span> spans;
  spans.reserve(by_step.size());
  int64_t t = 0;
  for (auto& [step, span] : by_step) {
    span.start_ns = t;
    t += span.length_ns;
    spans.push_back(span);
  }
  return spans;
}

// Ranks with records in any exported step, ascending.
std::vector<int32_t> RanksWithRecords(const std::vector<Span>& spans) {
  std::vector<int32_t> ranks;
  for (const Span& s : spans) {
    if (s.records == nullptr) continue;
    for (const v1::RankRecord& r : s.records->ranks()) ranks.push_back(r.rank());
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

// A verdict window, cut to the exported steps it covers.
struct Window {
  const v1::Verdict* verdict;
  int64_t start_ns, end_ns;
  bool clipped;
};

// Verdict windows by group, and the groups in track order ("job" first).
struct VerdictTracks {
  std::map<std::string, std::vector<Window>> groups;
  std::vector<std::string> order;
};

// The verdict groups whose windows overlap the exported steps.
VerdictTracks PlaceVerdicts(const std::vector<v1::Verdict>& verdicts,
                            const std::vector<Span>& spans) {
  VerdictTracks tracks;
  for (const v1::Verdict& v : verdicts) {
    auto first = std::lower_bound(spans.begin(), spans.end(), v.first_step(),
                                  [](const Span& s, int64_t step) { return s.step < step; });
    auto end = std::upper_bound(spans.begin(), spans.end(), v.last_step(),
                                [](int64_t step, const Span& s) { return step < s.step; });
    if (first >= end) continue;  // no exported step in the window
    const Span& last = *std::prev(end);
    const bool clipped = first->step != v.first_step() || last.step != v.last_step();
    tracks.groups[v.group()].push_back(
        Window{&v, first->start_ns, last.start_ns + last.length_ns, clipped});
  }
  if (tracks.groups.count("job") > 0) tracks.order.push_back("job");
  for (const auto& [g, w] : tracks.groups) {
    if (g != "job") tracks.order.push_back(g);
  }
  return tracks;
}

void AppendTrackNames(const VerdictTracks& tracks, const std::vector<int32_t>& ranks,
                      Json* events) {
  events->push_back(Metadata("process_name", kFrontierPid, 0, Json{{"name", "frontier"}}));
  events->push_back(Metadata("process_sort_index", kFrontierPid, 0, Json{{"sort_index", 0}}));
  events->push_back(Metadata("process_name", kRanksPid, 0, Json{{"name", "ranks"}}));
  events->push_back(Metadata("process_sort_index", kRanksPid, 0, Json{{"sort_index", 1}}));
  NameThread(events, kFrontierPid, kStepsTid, "steps", 0);
  NameThread(events, kFrontierPid, kFrontierTid, "frontier", 1);
  for (size_t g = 0; g < tracks.order.size(); ++g) {
    const std::string& name = tracks.order[g];
    NameThread(events, kFrontierPid, kFirstVerdictTid + static_cast<int>(g),
               name == "job" ? "verdicts" : absl::StrCat("verdicts (", name, ")"),
               2 + static_cast<int>(g));
  }
  for (int32_t r : ranks) NameThread(events, kRanksPid, r + 1, absl::StrCat("rank ", r), r);
}

// Track "steps": one slice per step.
void AppendStepSlices(const std::vector<Span>& spans, Json* events) {
  for (const Span& s : spans) {
    Json args{{"step", s.step}, {"length_ns", s.length_ns}};
    if (s.summary != nullptr) {
      args["exposed_ns"] = s.summary->exposed_ns();
      args["partial"] = s.summary->partial();
      args["missing_ranks"] = std::vector<int32_t>(s.summary->missing_ranks().begin(),
                                                   s.summary->missing_ranks().end());
      args["first_excess_stage"] = s.summary->first_excess_stage();
    } else {
      args["accounting"] = "not held";
    }
    args["rank_records"] = s.records != nullptr ? s.records->ranks_size() : 0;
    events->push_back(Event(absl::StrCat("step ", s.step), "step", kFrontierPid, kStepsTid,
                            s.start_ns, s.length_ns, std::move(args)));
  }
}

// Track "frontier": per accounted step, one slice per stage as long as its ΔF.
void AppendFrontierSlices(const std::vector<Span>& spans, const std::vector<std::string>& stages,
                          Json* events) {
  for (const Span& s : spans) {
    if (s.summary == nullptr) continue;
    int64_t t = s.start_ns;
    for (size_t k = 0; k < stages.size(); ++k) {
      const v1::StageStep& st = s.summary->stages(static_cast<int>(k));
      events->push_back(Event(stages[k], "frontier", kFrontierPid, kFrontierTid, t,
                              st.increment_ns(),
                              Json{{"step", s.step},
                                   {"stage", stages[k]},
                                   {"delta_f_ns", st.increment_ns()},
                                   {"leader", st.leader()},
                                   {"margin_ns", st.margin_ns()},
                                   {"baseline_ns", st.baseline_ns()},
                                   {"excess_ns", st.excess_ns()},
                                   {"mean_ns", st.mean_ns()},
                                   {"max_ns", st.max_ns()}}));
      t += st.increment_ns();
    }
  }
}

void AppendVerdictSlices(VerdictTracks& tracks, Json* events) {
  for (size_t g = 0; g < tracks.order.size(); ++g) {
    std::vector<Window>& windows = tracks.groups[tracks.order[g]];
    std::stable_sort(windows.begin(), windows.end(),
                     [](const Window& a, const Window& b) { return a.start_ns < b.start_ns; });
    for (const Window& w : windows) {
      events->push_back(Event(VerdictName(*w.verdict), "verdict", kFrontierPid,
                              kFirstVerdictTid + static_cast<int>(g), w.start_ns,
                              w.end_ns - w.start_ns, VerdictArgs(*w.verdict, w.clipped)));
    }
  }
}

// Process "ranks": rank by rank, so that each track's events are in time order.
void AppendRankSlices(const std::vector<Span>& spans, const std::vector<std::string>& stages,
                      const std::vector<int32_t>& ranks, Json* events) {
  std::vector<std::vector<std::pair<const Span*, const v1::RankRecord*>>> by_rank(ranks.size());
  for (const Span& s : spans) {
    if (s.records == nullptr) continue;
    for (const v1::RankRecord& rec : s.records->ranks()) {
      const size_t i = static_cast<size_t>(
          std::lower_bound(ranks.begin(), ranks.end(), rec.rank()) - ranks.begin());
      by_rank[i].emplace_back(&s, &rec);
    }
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int32_t r = ranks[i];
    for (const auto& [s, rec] : by_rank[i]) {
      int64_t t = s->start_ns;
      for (size_t k = 0; k < stages.size(); ++k) {
        const int64_t d = rec->durations_ns(static_cast<int>(k));
        events->push_back(
            Event(stages[k], "rank", kRanksPid, r + 1, t, d,
                  Json{{"step", s->step}, {"rank", r}, {"stage", stages[k]}, {"duration_ns", d}}));
        t += d;
      }
    }
  }
}

// The document's "metadata": the range, what the replies held, the stages and how to read it.
Json TraceMetadata(const PerfettoExportInput& in, const std::vector<Span>& spans,
                   const std::vector<std::string>& stages) {
  Json stage_list = Json::array();
  for (size_t k = 0; k < stages.size(); ++k) {
    Json st{{"name", stages[k]}};
    if (static_cast<int>(k) < in.ranks.stages_size()) {
      st["kind"] = KindName(in.ranks.stages(static_cast<int>(k)).kind());
    }
    stage_list.push_back(std::move(st));
  }
  Json meta;
  meta["source"] = "StageFrontier: sfctl export";
  meta["job"] = in.job;
  meta["from_step"] = in.from_step;
  const int64_t last = spans.empty() ? -1 : spans.back().step;
  meta["to_step"] = in.to_step.value_or(last);
  meta["to_step_open"] = !in.to_step.has_value();  // no --to: to_step is the last exported
  meta["first_step"] = spans.empty() ? -1 : spans.front().step;
  meta["last_step"] = last;
  meta["steps"] = spans.size();
  meta["oldest_accounted_step_held"] = in.steps.oldest_held_step();
  meta["oldest_rank_records_held"] = in.ranks.oldest_held_step();
  meta["world_size"] = in.ranks.world_size();
  meta["stages"] = std::move(stage_list);
  meta["clock"] = kClockNote;
  meta["tracks"] = kFrontierNote;
  return meta;
}

}  // namespace

absl::StatusOr<std::string> BuildPerfettoTrace(const PerfettoExportInput& in) {
  std::vector<std::string> stages;
  absl::StatusOr<std::vector<Span>> laid = Layout(in, &stages);
  if (!laid.ok()) return laid.status();
  const std::vector<Span>& spans = *laid;
  const std::vector<int32_t> ranks = RanksWithRecords(spans);
  VerdictTracks tracks = PlaceVerdicts(in.verdicts, spans);

  Json events = Json::array();
  AppendTrackNames(tracks, ranks, &events);
  AppendStepSlices(spans, &events);
  AppendFrontierSlices(spans, stages, &events);
  AppendVerdictSlices(tracks, &events);
  AppendRankSlices(spans, stages, ranks, &events);

  Json doc;
  doc["traceEvents"] = std::move(events);
  doc["displayTimeUnit"] = "ms";
  doc["metadata"] = TraceMetadata(in, spans, stages);
  // Names come from trainers: bytes that are not UTF-8 are replaced, never thrown on.
  return doc.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace stagefrontier
