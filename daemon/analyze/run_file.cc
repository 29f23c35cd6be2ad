#include "daemon/analyze/run_file.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stagefrontier {

namespace {

using nlohmann::json;

struct LineError {
  int64_t line;
  absl::Status Field(const char* field, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", line, ": field \"", field, "\": ", what));
  }
  absl::Status Whole(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what));
  }
};

const char* TypeName(const json& v) { return v.type_name(); }

absl::StatusOr<int64_t> Int(const json& obj, const char* field, const LineError& at) {
  auto it = obj.find(field);
  if (it == obj.end()) return at.Whole(absl::StrCat("missing field \"", field, "\""));
  if (!it->is_number_integer()) {
    return at.Field(field, absl::StrCat("expected an integer, got ", TypeName(*it)));
  }
  return it->get<int64_t>();
}

absl::StatusOr<StageSchema> Schema(const json& obj, const LineError& at) {
  auto it = obj.find("schema");
  if (it == obj.end()) return at.Whole("missing field \"schema\"");
  if (!it->is_array())
    return at.Field("schema", absl::StrCat("expected an array, got ", TypeName(*it)));
  std::vector<Stage> stages;
  for (size_t k = 0; k < it->size(); ++k) {
    const json& e = (*it)[k];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_string()) {
      return at.Field("schema", absl::StrCat("entry ", k, " is not [\"name\", \"kind\"]"));
    }
    absl::StatusOr<StageKind> kind = ParseStageKind(e[1].get<std::string>());
    if (!kind.ok()) return at.Field("schema", kind.status().message());
    stages.push_back(Stage{e[0].get<std::string>(), *kind});
  }
  absl::StatusOr<StageSchema> schema = StageSchema::Create(std::move(stages));
  if (!schema.ok()) return at.Field("schema", schema.status().message());
  return schema;
}

// The fields every record carries, type-checked, in the order they are checked.
struct RecordHeader {
  std::string job;
  int64_t world_size = 0;
  int64_t rank = 0;
  int64_t step = 0;
  std::optional<StageSchema> schema;
};

absl::StatusOr<RecordHeader> ReadHeader(const json& obj, const LineError& at) {
  RecordHeader h;
  auto job_it = obj.find("job");
  if (job_it == obj.end()) return at.Whole("missing field \"job\"");
  if (!job_it->is_string())
    return at.Field("job", absl::StrCat("expected a string, got ", TypeName(*job_it)));
  h.job = job_it->get<std::string>();
  absl::StatusOr<int64_t> world = Int(obj, "world_size", at);
  if (!world.ok()) return world.status();
  h.world_size = *world;
  absl::StatusOr<int64_t> rank = Int(obj, "rank", at);
  if (!rank.ok()) return rank.status();
  h.rank = *rank;
  absl::StatusOr<int64_t> step = Int(obj, "step", at);
  if (!step.ok()) return step.status();
  h.step = *step;
  absl::StatusOr<StageSchema> schema = Schema(obj, at);
  if (!schema.ok()) return schema.status();
  h.schema = *std::move(schema);
  return h;
}

absl::Status ReadBoundaries(const json& obj, const LineError& at, RankStep* record) {
  auto b = obj.find("boundaries_ns");
  if (b == obj.end()) return at.Whole("missing field \"boundaries_ns\"");
  if (!b->is_array())
    return at.Field("boundaries_ns", absl::StrCat("expected an array, got ", TypeName(*b)));
  for (size_t i = 0; i < b->size(); ++i) {
    if (!(*b)[i].is_number_integer()) {
      return at.Field("boundaries_ns",
                      absl::StrCat("element ", i, " is ", TypeName((*b)[i]), ", not an integer"));
    }
    record->boundaries_ns.push_back((*b)[i].get<int64_t>());
  }
  return absl::OkStatus();
}

// The optional "probe": [stage, enter_ns, exit_ns] spans.
absl::Status ReadProbe(const json& obj, const LineError& at, RankStep* record) {
  auto p = obj.find("probe");
  if (p == obj.end()) return absl::OkStatus();
  if (!p->is_array())
    return at.Field("probe", absl::StrCat("expected an array, got ", TypeName(*p)));
  for (size_t i = 0; i < p->size(); ++i) {
    const json& e = (*p)[i];
    if (!e.is_array() || e.size() != 3 || !e[0].is_number_unsigned() || !e[1].is_number_integer() ||
        !e[2].is_number_integer()) {
      return at.Field("probe", absl::StrCat("entry ", i, " is not [stage, enter_ns, exit_ns]"));
    }
    ProbeSpan span;
    span.stage = static_cast<uint32_t>(std::min<uint64_t>(e[0].get<uint64_t>(), UINT32_MAX));
    span.enter_ns = e[1].get<int64_t>();
    span.exit_ns = e[2].get<int64_t>();
    span.call_ns = span.enter_ns;
    record->probe.push_back(span);
  }
  return absl::OkStatus();
}

// Reads a run line by line; every record must agree with the first on job, world size and
// schema.
class RunParser {
 public:
  absl::Status AddLine(const std::string& line, int64_t n) {
    const LineError at{n};
    if (line.size() > kMaxRunLineBytes) return at.Whole("line longer than 1 MiB");
    if (line.find_first_not_of(" \t\r") == std::string::npos) return absl::OkStatus();
    json obj = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (obj.is_discarded()) return at.Whole("not valid JSON (truncated or malformed record)");
    if (!obj.is_object())
      return at.Whole(absl::StrCat("expected a JSON object, got ", TypeName(obj)));
    absl::StatusOr<RecordHeader> h = ReadHeader(obj, at);
    if (!h.ok()) return h.status();
    if (absl::Status s = CheckHeader(*h, at); !s.ok()) return s;
    RankStep record;
    record.rank = static_cast<int32_t>(h->rank);
    if (absl::Status s = ReadBoundaries(obj, at, &record); !s.ok()) return s;
    if (absl::Status s = ReadProbe(obj, at, &record); !s.ok()) return s;
    if (absl::Status s = ValidateRankStep(*run_.schema, run_.world_size, record); !s.ok()) {
      const char* field =
          record.probe.empty() || s.message().find("probe") == absl::string_view::npos
              ? "boundaries_ns"
              : "probe";
      return at.Field(field, s.message());
    }
    if (absl::Status s = ReadGroup(obj, record.rank, at); !s.ok()) return s;
    auto [dup, fresh] = seen_.emplace(std::make_pair(record.rank, h->step), n);
    if (!fresh) {
      return at.Whole(absl::StrCat("rank ", record.rank, " step ", h->step,
                                   " already appeared on line ", dup->second));
    }
    StepInput& s = run_.steps[h->step];
    s.step = h->step;
    s.ranks.push_back(std::move(record));
    ++run_.records;
    return absl::OkStatus();
  }

  // The run, once every line was added.
  absl::StatusOr<RecordedRun> Finish() && {
    if (run_.records == 0) return absl::InvalidArgumentError("no records (empty run file)");
    if (!group_of_.empty()) {
      if (static_cast<int32_t>(group_of_.size()) != run_.world_size) {
        return absl::InvalidArgumentError(absl::StrCat("\"group\" is given for ", group_of_.size(),
                                                       " of ", run_.world_size,
                                                       " ranks; give it for all or none"));
      }
      int32_t count = 0;
      for (auto [rank, g] : group_of_) count = std::max(count, g + 1);
      run_.groups.assign(count, {});
      for (auto [rank, g] : group_of_) run_.groups[g].push_back(rank);
      std::erase_if(run_.groups, [](const auto& g) { return g.empty(); });
    }
    return std::move(run_);
  }

 private:
  // The first record sets the job, world size and schema; later ones must agree.
  absl::Status CheckHeader(const RecordHeader& h, const LineError& at) {
    if (run_.records == 0) {
      if (h.world_size < 1 || h.world_size > (1 << 20))
        return at.Field("world_size", absl::StrCat(h.world_size, " is outside [1, 1048576]"));
      run_.job = h.job;
      run_.world_size = static_cast<int32_t>(h.world_size);
      run_.schema = h.schema;
      first_line_ = at.line;
    } else {
      if (h.job != run_.job) {
        return at.Field("job", absl::StrCat("\"", h.job, "\" differs from \"", run_.job,
                                            "\" on line ", first_line_, " (one job per file)"));
      }
      if (h.world_size != run_.world_size) {
        return at.Field("world_size", absl::StrCat(h.world_size, " differs from ", run_.world_size,
                                                   " on line ", first_line_));
      }
      if (!(*h.schema == *run_.schema)) {
        return at.Field("schema",
                        absl::StrCat("rank ", h.rank, "'s schema \"", h.schema->ToString(),
                                     "\" differs from the job's \"", run_.schema->ToString(),
                                     "\" (line ", first_line_, ")"));
      }
    }
    if (h.rank < 0 || h.rank >= run_.world_size) {
      return at.Field("rank", absl::StrCat(h.rank, " is outside [0, ", run_.world_size, ")"));
    }
    if (h.step < 0) return at.Field("step", absl::StrCat(h.step, " is negative"));
    return absl::OkStatus();
  }

  // The optional "group": a rank's sync group, the same on every line of that rank.
  absl::Status ReadGroup(const json& obj, int32_t rank, const LineError& at) {
    auto g = obj.find("group");
    if (g == obj.end()) return absl::OkStatus();
    if (!g->is_number_integer() || g->get<int64_t>() < 0 || g->get<int64_t>() >= run_.world_size) {
      return at.Field("group", "expected an integer in [0, world_size)");
    }
    const int32_t group = static_cast<int32_t>(g->get<int64_t>());
    auto [it, inserted] = group_of_.emplace(rank, group);
    if (!inserted && it->second != group) {
      return at.Field("group",
                      absl::StrCat("rank ", rank, " was in group ", it->second, " before"));
    }
    return absl::OkStatus();
  }

  RecordedRun run_;
  std::map<std::pair<int32_t, int64_t>, int64_t> seen_;  // (rank, step) -> line
  std::map<int32_t, int32_t> group_of_;
  int64_t first_line_ = 0;
};

}  // namespace

absl::StatusOr<RecordedRun> ParseRun(std::istream& in) {
  RunParser parser;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    if (absl::Status s = parser.AddLine(line, ++n); !s.ok()) return s;
  }
  if (in.bad()) return absl::DataLossError("read error");
  return std::move(parser).Finish();
}

absl::StatusOr<RecordedRun> ReadRunFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  absl::StatusOr<RecordedRun> run = ParseRun(in);
  if (!run.ok())
    return absl::Status(run.status().code(), absl::StrCat(path, ": ", run.status().message()));
  return run;
}

std::string FormatRunRecord(const std::string& job, int32_t world_size, const StageSchema& schema,
                            int64_t step, const RankStep& record, int32_t group) {
  nlohmann::ordered_json j;
  j["job"] = job;
  j["world_size"] = world_size;
  j["rank"] = record.rank;
  j["step"] = step;
  if (group >= 0) j["group"] = group;
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (const Stage& s : schema.stages()) stages.push_back({s.name, StageKindName(s.kind)});
  j["schema"] = stages;
  j["boundaries_ns"] = record.boundaries_ns;
  if (!record.probe.empty()) {
    nlohmann::ordered_json p = nlohmann::ordered_json::array();
    for (const ProbeSpan& s : record.probe) p.push_back({s.stage, s.enter_ns, s.exit_ns});
    j["probe"] = p;
  }
  return j.dump();
}

}  // namespace stagefrontier
