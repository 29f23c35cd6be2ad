#include "daemon/analyze/trace_run.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "daemon/wire/packed_steps.h"

namespace stagefrontier {

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
