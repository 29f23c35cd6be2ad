// The trace sfctl export writes: a valid Chrome Trace Event Format document whose frontier
// slices sum, step by step, to the exposed time the engine accounted, whose rank slices are the
// recorded stage durations, aligned at step starts, with the verdict windows as slices.
// The replies are built by the real engine (StepToProto, VerdictToProto), as the coordinator
// does.
#include "daemon/sfctl/perfetto_export.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <utility>

#include "daemon/accounting/engine.h"
#include "daemon/coordinator/proto_convert.h"

namespace stagefrontier {
namespace {

using nlohmann::json;

constexpr int kWorld = 4;
constexpr int kStages = 4;
constexpr int kSlowRank = 2;
constexpr int kMissingStep = 17;  // rank 3 does not report it: a partial step

// ns from a µs value as Perfetto reads it (llround of ts × 1000).
int64_t Ns(const json& us) { return std::llround(us.get<double>() * 1000.0); }

// Everything the Chrome Trace Event Format (JSON object format) asks of the events this
// export writes; an empty list when the document is valid.
std::vector<std::string> ChromeTraceProblems(const json& doc) {
  std::vector<std::string> p;
  if (!doc.is_object()) return {"the document is not a JSON object"};
  if (!doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    return {"no traceEvents array"};
  }
  if (doc.value("displayTimeUnit", "") != "ms" && doc.value("displayTimeUnit", "") != "ns") {
    p.push_back("displayTimeUnit is neither ms nor ns");
  }
  std::set<int> named_processes;
  std::set<std::pair<int, int>> named_threads;
  std::map<std::pair<int, int>, std::vector<const json*>> slices;
  for (const json& e : doc["traceEvents"]) {
    const std::string where = e.dump().substr(0, 120);
    const size_t before = p.size();
    if (!e.is_object()) {
      p.push_back("an event is not an object: " + where);
      continue;
    }
    for (const char* key : {"name", "ph"}) {
      if (!e.contains(key) || !e[key].is_string()) p.push_back(std::string(key) + ": " + where);
    }
    for (const char* key : {"pid", "tid"}) {
      if (!e.contains(key) || !e[key].is_number_integer()) {
        p.push_back(std::string(key) + " not an integer: " + where);
      }
    }
    if (!e.contains("ts") || !e["ts"].is_number() || e["ts"].get<double>() < 0) {
      p.push_back("ts not a number >= 0: " + where);
    }
    if (p.size() != before) continue;
    const std::string ph = e["ph"];
    const std::pair<int, int> track{e["pid"].get<int>(), e["tid"].get<int>()};
    if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) {
        p.push_back("X event without dur >= 0: " + where);
      }
      if (e.contains("args") && !e["args"].is_object()) p.push_back("args not an object: " + where);
      // Every slice says its step, or a verdict window its steps.
      if (!e.contains("args") ||
          !(e["args"].contains("step") ||
            (e["args"].contains("first_step") && e["args"].contains("last_step")))) {
        p.push_back("X event without its step numbers: " + where);
      }
      slices[track].push_back(&e);
    } else if (ph == "M") {
      const std::string name = e["name"];
      if (!e.contains("args") || !e["args"].is_object()) {
        p.push_back("M event without args: " + where);
      } else if (name == "process_name" || name == "thread_name") {
        if (!e["args"].contains("name") || !e["args"]["name"].is_string()) {
          p.push_back("M event without args.name: " + where);
        }
        if (name == "process_name") named_processes.insert(track.first);
        if (name == "thread_name") named_threads.insert(track);
      } else if (name == "process_sort_index" || name == "thread_sort_index") {
        if (!e["args"].contains("sort_index") || !e["args"]["sort_index"].is_number_integer()) {
          p.push_back("M event without an integer args.sort_index: " + where);
        }
      } else {
        p.push_back("unknown metadata event: " + where);
      }
    } else {
      p.push_back("a phase this export does not write: " + where);
    }
  }
  for (const auto& [track, events] : slices) {
    if (named_processes.count(track.first) == 0) {
      p.push_back("pid " + std::to_string(track.first) + " has no process_name");
    }
    if (named_threads.count(track) == 0) {
      p.push_back("tid " + std::to_string(track.second) + " has no thread_name");
    }
    // In time order, one after the other: no slice starts before the previous one ended.
    int64_t end = INT64_MIN;
    for (const json* e : events) {
      const int64_t ts = Ns((*e)["ts"]);
      if (ts < end) p.push_back("slices overlap or are out of order: " + e->dump());
      end = ts + Ns((*e)["dur"]);
    }
  }
  return p;
}

std::map<std::pair<int, int>, std::string> ThreadNames(const json& doc) {
  std::map<std::pair<int, int>, std::string> out;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      out[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    }
  }
  return out;
}

// The X events of the thread named `name`, in document order.
std::vector<json> Track(const json& doc, const std::string& name) {
  const auto names = ThreadNames(doc);
  std::vector<json> out;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    auto it = names.find({e["pid"].get<int>(), e["tid"].get<int>()});
    if (it != names.end() && it->second == name) out.push_back(e);
  }
  return out;
}

// A job of kWorld ranks run through the real engine: what GetSteps, GetRankSteps and
// WatchVerdicts would answer for steps 1..30, rank 2's data stage 6 ms slow.
struct Job {
  Job() : schema(*StageSchema::Parse("data:io,forward:compute,grad_sync:sync,optimizer:compute")) {
    JobConfig config{.schema = schema,
                     .world_size = kWorld,
                     .groups = {},
                     .group_names = {},
                     .groups_are_roles = false,
                     .engine = {},
                     .probe_bracket_rules = "",
                     .group_pipeline_stages = {}};
    config.engine.window_steps = 10;
    auto e = Engine::Create(config);
    REQUIRE(e.ok());
    engine = *std::move(e);
    SchemaToProto(schema, ranks.mutable_stages());
    ranks.set_world_size(kWorld);
    ranks.set_oldest_held_step(1);
    for (const Stage& s : schema.stages()) steps.add_stages(s.name);
    steps.set_oldest_held_step(1);
    std::mt19937 rng(11);
    std::uniform_int_distribution<int64_t> jitter(0, 400'000);
    for (int64_t step = 1; step <= 30; ++step) {
      StepInput in;
      in.step = step;
      v1::StepRecords* rec = ranks.add_steps();
      rec->set_step(step);
      // Every rank ends grad_sync when the slowest gets there: its wait absorbs the skew.
      std::vector<std::vector<int64_t>> d(kWorld);
      int64_t sync_end = 0;
      for (int r = 0; r < kWorld; ++r) {
        d[r] = {4'000'000 + jitter(rng) + (r == kSlowRank ? 6'000'000 : 0), 8'000'000 + jitter(rng),
                0, 3'000'000 + jitter(rng)};
        sync_end = std::max(sync_end, d[r][0] + d[r][1] + 200'000);
      }
      for (int r = 0; r < kWorld; ++r) {
        if (step == kMissingStep && r == 3) continue;
        d[r][2] = sync_end - d[r][0] - d[r][1] + jitter(rng) / 8;
        RankStep rs;
        rs.rank = r;
        rs.boundaries_ns = {0};
        v1::RankRecord* rr = rec->add_ranks();
        rr->set_rank(r);
        for (int64_t v : d[r]) {
          rs.boundaries_ns.push_back(rs.boundaries_ns.back() + v);
          rr->add_durations_ns(v);
        }
        in.ranks.push_back(std::move(rs));
      }
      REQUIRE(engine->AddStep(in).ok());
      StepToProto(schema, *engine->LastStep(), steps.add_steps());
      for (const Verdict& v : engine->TakeClosedVerdicts()) {
        VerdictToProto(schema, v, kWorld - 1, &verdicts.emplace_back());
      }
    }
  }

  // The export of [from, to], as sfctl would fetch it.
  PerfettoExportInput Export(int64_t from, int64_t to) const {
    PerfettoExportInput in;
    in.job = "job-1";
    in.from_step = from;
    in.to_step = to;
    *in.steps.mutable_stages() = steps.stages();
    in.steps.set_oldest_held_step(steps.oldest_held_step());
    for (const v1::StepSummary& s : steps.steps()) {
      if (s.step() >= from && s.step() <= to) *in.steps.add_steps() = s;
    }
    *in.ranks.mutable_stages() = ranks.stages();
    in.ranks.set_world_size(kWorld);
    in.ranks.set_oldest_held_step(ranks.oldest_held_step());
    in.ranks.set_next_step(-1);
    for (const v1::StepRecords& s : ranks.steps()) {
      if (s.step() >= from && s.step() <= to) *in.ranks.add_steps() = s;
    }
    in.verdicts = verdicts;
    return in;
  }

  StageSchema schema;
  std::unique_ptr<Engine> engine;
  v1::GetStepsReply steps;
  v1::GetRankStepsReply ranks;
  std::vector<v1::Verdict> verdicts;
};

json Build(const PerfettoExportInput& in) {
  absl::StatusOr<std::string> text = BuildPerfettoTrace(in);
  REQUIRE(text.ok());
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  REQUIRE(!doc.is_discarded());
  return doc;
}

TEST_CASE("the export is a valid Chrome trace with the tracks it promises") {
  Job job;
  const json doc = Build(job.Export(5, 25));
  const std::vector<std::string> problems = ChromeTraceProblems(doc);
  for (const std::string& p : problems) UNSCOPED_INFO(p);
  CHECK(problems.empty());

  std::set<std::string> names;
  for (const auto& [track, name] : ThreadNames(doc)) names.insert(name);
  for (const char* want :
       {"steps", "frontier", "verdicts", "rank 0", "rank 1", "rank 2", "rank 3"}) {
    CHECK(names.count(want) == 1);
  }
  CHECK(doc["metadata"]["job"] == "job-1");
  CHECK(doc["metadata"]["first_step"] == 5);
  CHECK(doc["metadata"]["last_step"] == 25);
  CHECK_THAT(doc["metadata"]["clock"].get<std::string>(),
             Catch::Contains("Aligned at step starts") && Catch::Contains("own"));
  CHECK(Track(doc, "steps").size() == 21);
  CHECK(Track(doc, "frontier").size() == 21 * kStages);
  // Rank 3 did not report the partial step.
  CHECK(Track(doc, "rank 0").size() == 21 * kStages);
  CHECK(Track(doc, "rank 3").size() == 20 * kStages);
}

TEST_CASE("frontier slices sum to the exposed time; rank slices are the recorded durations") {
  Job job;
  const PerfettoExportInput in = job.Export(5, 25);
  const json doc = Build(in);
  std::map<int64_t, const v1::StepSummary*> accounted;
  for (const v1::StepSummary& s : in.steps.steps()) accounted[s.step()] = &s;

  // Frontier: per step, its slices in stage order, each ΔF; their sum the exposed time.
  std::map<int64_t, std::vector<json>> frontier;
  for (const json& e : Track(doc, "frontier")) frontier[e["args"]["step"]].push_back(e);
  REQUIRE(frontier.size() == accounted.size());
  for (const auto& [step, slices] : frontier) {
    const v1::StepSummary& s = *accounted.at(step);
    REQUIRE(slices.size() == kStages);
    int64_t sum_ns = 0;
    double sum_us = 0;
    for (size_t k = 0; k < slices.size(); ++k) {
      CHECK(slices[k]["name"] == in.steps.stages(static_cast<int>(k)));
      CHECK(Ns(slices[k]["dur"]) == s.stages(static_cast<int>(k)).increment_ns());
      CHECK(slices[k]["args"]["leader"] == s.stages(static_cast<int>(k)).leader());
      sum_ns += Ns(slices[k]["dur"]);
      sum_us += slices[k]["dur"].get<double>();
    }
    CHECK(sum_ns == s.exposed_ns());
    CHECK(std::abs(sum_us - s.exposed_ns() / 1000.0) < 1e-6 * kStages);
  }

  // The slow rank leads the data stage: the frontier names it.
  const std::vector<json>& step10 = frontier.at(10);
  CHECK(step10[0]["args"]["leader"] == kSlowRank);

  // Steps: every track starts a step at the same time, and the step is as long as its exposed
  // time; the next step starts where it ends.
  std::map<int64_t, int64_t> step_start;
  int64_t t = 0;
  for (const json& e : Track(doc, "steps")) {
    const int64_t step = e["args"]["step"];
    CHECK(Ns(e["ts"]) == t);
    CHECK(Ns(e["dur"]) == accounted.at(step)->exposed_ns());
    step_start[step] = Ns(e["ts"]);
    t += Ns(e["dur"]);
  }
  for (const auto& [step, slices] : frontier) CHECK(Ns(slices[0]["ts"]) == step_start.at(step));

  // Ranks: per step, the recorded durations in stage order, back to back from the step start.
  std::map<std::pair<int64_t, int32_t>, const v1::RankRecord*> recorded;
  for (const v1::StepRecords& s : in.ranks.steps()) {
    for (const v1::RankRecord& r : s.ranks()) recorded[{s.step(), r.rank()}] = &r;
  }
  size_t seen = 0;
  for (int r = 0; r < kWorld; ++r) {
    std::map<int64_t, std::vector<json>> by_step;
    for (const json& e : Track(doc, "rank " + std::to_string(r))) {
      CHECK(e["args"]["rank"] == r);
      by_step[e["args"]["step"]].push_back(e);
    }
    for (const auto& [step, slices] : by_step) {
      const v1::RankRecord& rec = *recorded.at({step, r});
      REQUIRE(slices.size() == kStages);
      int64_t at = step_start.at(step);
      int64_t total = 0;
      for (size_t k = 0; k < kStages; ++k) {
        CHECK(Ns(slices[k]["ts"]) == at);
        CHECK(Ns(slices[k]["dur"]) == rec.durations_ns(static_cast<int>(k)));
        CHECK(slices[k]["args"]["duration_ns"] == rec.durations_ns(static_cast<int>(k)));
        at += rec.durations_ns(static_cast<int>(k));
        total += rec.durations_ns(static_cast<int>(k));
      }
      // No rank's step is longer than the exposed time (the longest rank's).
      CHECK(total <= accounted.at(step)->exposed_ns());
      ++seen;
    }
  }
  CHECK(seen == recorded.size());
}

TEST_CASE("verdict windows are slices over the steps they cover, clipped to the export") {
  Job job;
  REQUIRE(job.verdicts.size() == 3);  // windows 1..10, 11..20, 21..30
  const json doc = Build(job.Export(5, 25));
  const std::vector<json> windows = Track(doc, "verdicts");
  REQUIRE(windows.size() == 3);
  std::map<int64_t, int64_t> start, end;
  for (const json& e : Track(doc, "steps")) {
    start[e["args"]["step"]] = Ns(e["ts"]);
    end[e["args"]["step"]] = Ns(e["ts"]) + Ns(e["dur"]);
  }
  const int64_t spans[3][2] = {{5, 10}, {11, 20}, {21, 25}};
  for (size_t i = 0; i < windows.size(); ++i) {
    const json& w = windows[i];
    const v1::Verdict& v = job.verdicts[i];
    CHECK(Ns(w["ts"]) == start.at(spans[i][0]));
    CHECK(Ns(w["ts"]) + Ns(w["dur"]) == end.at(spans[i][1]));
    CHECK(w["args"]["label"] == v.label());
    CHECK(w["args"]["reason"] == v.reason());
    CHECK(w["args"]["first_step"] == v.first_step());
    CHECK(w["args"]["last_step"] == v.last_step());
    CHECK(w["args"]["clipped"] == (i != 1));
    CHECK_THAT(w["name"].get<std::string>(), Catch::StartsWith(v.label()));
  }
  // The slow rank's data stage is what the windows after warm-up name.
  const json& last = windows[2];
  CHECK(last["args"]["label"] == "CLEAR");
  CHECK(last["name"] == "CLEAR: data on rank 2");
  CHECK(last["args"]["suspects"][0]["stage"] == "data");
  CHECK(last["args"]["suspects"][0]["rank"] == kSlowRank);

  // A window outside the export is left out; a sync group's windows get their own track.
  PerfettoExportInput in = job.Export(11, 20);
  v1::Verdict group = job.verdicts[1];
  group.set_group("pp0");
  in.verdicts.push_back(group);
  const json two = Build(in);
  CHECK(Track(two, "verdicts").size() == 1);
  CHECK(Track(two, "verdicts (pp0)").size() == 1);
  CHECK(ChromeTraceProblems(two).empty());

  // Issue 30, item 10: a window spanning profiled steps left out of its evidence says so.
  CHECK(windows[1]["args"]["window"] == "window of 10 steps");
  PerfettoExportInput profiled = job.Export(11, 20);
  profiled.verdicts[1].set_steps(8);
  profiled.verdicts[1].set_profiled_steps_left_out(2);
  const json three = Build(profiled);
  const json w = Track(three, "verdicts").at(0);
  CHECK(w["args"]["profiled_steps_left_out"] == 2);
  CHECK(w["args"]["window"] == "window of 8 steps (11..20; 2 profiled steps left out)");
}

// Issue 30, item 10: without --to the metadata said "to_step": 9223372036854775807.
TEST_CASE("the metadata's to_step is the last step exported when no --to was given") {
  Job job;
  PerfettoExportInput open = job.Export(5, INT64_MAX);
  open.to_step.reset();
  const json meta = Build(open)["metadata"];
  CHECK(meta["from_step"] == 5);
  CHECK(meta["to_step"] == 30);
  CHECK(meta["to_step_open"] == true);
  CHECK(meta["last_step"] == 30);

  const json asked = Build(job.Export(5, 40))["metadata"];
  CHECK(asked["to_step"] == 40);  // the range asked, beyond the steps held
  CHECK(asked["to_step_open"] == false);
  CHECK(asked["last_step"] == 30);

  const json empty = Build(PerfettoExportInput{})["metadata"];
  CHECK(empty["to_step"] == -1);
  CHECK(empty["to_step_open"] == true);
}

TEST_CASE("steps held by one reply only, and an empty export") {
  Job job;
  PerfettoExportInput in = job.Export(5, 14);
  // The accounting of steps 5..7 is gone; the rank records of 12..14 are.
  in.steps.mutable_steps()->DeleteSubrange(0, 3);
  in.ranks.mutable_steps()->DeleteSubrange(7, 3);
  const json doc = Build(in);
  CHECK(ChromeTraceProblems(doc).empty());
  CHECK(Track(doc, "steps").size() == 10);
  CHECK(Track(doc, "frontier").size() == 7 * kStages);
  CHECK(Track(doc, "rank 0").size() == 7 * kStages);
  for (const json& e : Track(doc, "steps")) {
    const int64_t step = e["args"]["step"];
    CHECK(e["args"].contains("exposed_ns") == (step >= 8));
    CHECK(e["args"]["rank_records"] == (step <= 11 ? kWorld : 0));
  }

  const json empty = Build(PerfettoExportInput{});
  CHECK(ChromeTraceProblems(empty).empty());
  CHECK(empty["metadata"]["steps"] == 0);
}

TEST_CASE("replies that disagree are refused, naming the step") {
  Job job;
  {
    PerfettoExportInput in = job.Export(5, 8);
    in.steps.set_stages(0, "io");
    absl::StatusOr<std::string> out = BuildPerfettoTrace(in);
    CHECK(out.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(out.status().message()), Catch::Contains("different stages"));
  }
  {
    PerfettoExportInput in = job.Export(5, 8);
    in.ranks.mutable_steps(1)->mutable_ranks(2)->add_durations_ns(5);
    absl::StatusOr<std::string> out = BuildPerfettoTrace(in);
    CHECK(out.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(out.status().message()),
               Catch::Contains("step 6") && Catch::Contains("rank 2 has 5 stage durations"));
  }
  {
    PerfettoExportInput in = job.Export(5, 8);
    in.ranks.mutable_steps(0)->mutable_ranks(1)->set_durations_ns(0, -1);
    CHECK(BuildPerfettoTrace(in).status().code() == absl::StatusCode::kInvalidArgument);
  }
  {
    PerfettoExportInput in = job.Export(5, 8);
    in.steps.mutable_steps()->SwapElements(0, 1);
    absl::StatusOr<std::string> out = BuildPerfettoTrace(in);
    CHECK(out.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(out.status().message()), Catch::Contains("increasing order"));
  }
}

}  // namespace
}  // namespace stagefrontier
