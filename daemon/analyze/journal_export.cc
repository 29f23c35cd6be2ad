#include "daemon/analyze/journal_export.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/coordinator/job_layout.h"
#include "daemon/coordinator/proto_convert.h"
#include "daemon/journal/journal_reader.h"
#include "daemon/wire/packed_steps.h"
#include "shm/segment_layout_v1.h"

namespace stagefrontier {

namespace {

// The job's role groups from its ranks' declared layouts, as the coordinator forms them
// (GroupsFromLayout): a layout that does not fit is said in a note, and the job stays one group.
void ApplyLayout(const std::map<int32_t, DeclaredLayout>& layouts, JournalRun* out) {
  RecordedRun& run = out->run;
  if (layouts.empty() || run.world_size <= 0) return;
  std::vector<DeclaredLayout> by_rank(static_cast<size_t>(run.world_size));
  for (const auto& [rank, layout] : layouts) {
    if (rank >= 0 && rank < run.world_size) by_rank[static_cast<size_t>(rank)] = layout;
  }
  absl::StatusOr<LayoutGroups> groups = GroupsFromLayout(by_rank);
  if (!groups.ok()) {
    out->notes.push_back(
        absl::StrCat("layout not applied (one group): ", groups.status().message()));
    return;
  }
  if (groups->pending || groups->groups.empty()) return;
  run.groups = groups->groups;
  run.group_names = groups->names;
  run.group_pipeline_stages = groups->pipeline_stages;
  out->notes.push_back(absl::StrCat("sync groups from the ranks' layout: ", groups->groups.size()));
}

}  // namespace

absl::StatusOr<JournalRun> ReadJournalAsRun(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string data = bytes.str();
  JournalRun out;
  RecordedRun& run = out.run;
  std::set<std::pair<int32_t, int64_t>> seen;
  std::map<int32_t, DeclaredLayout> layouts;  // each rank's latest owner's
  const JournalScan scan = ScanJournal(data, [&](const v1::JournalRecord& rec) {
    ++out.journal_records;
    if (rec.has_owner()) {
      layouts[rec.owner().rank()] = LayoutFromProto(rec.owner().layout());
      return absl::OkStatus();
    }
    if (rec.has_declared()) {
      if (run.schema.has_value()) return absl::OkStatus();  // a copy
      absl::StatusOr<StageSchema> schema = SchemaFromProto(rec.declared().stages());
      if (!schema.ok()) return schema.status();
      run.schema = *std::move(schema);
      run.job = rec.declared().job();
      run.world_size = rec.declared().world_size();
      return absl::OkStatus();
    }
    if (!rec.has_ranks()) return absl::OkStatus();
    if (!run.schema.has_value()) {
      return absl::InvalidArgumentError("rank-steps before the job's declaration");
    }
    const uint32_t stages = static_cast<uint32_t>(run.schema->size());
    for (const v1::RankSteps& rs : rec.ranks().steps()) {
      if (rs.rank() < 0 || rs.rank() >= run.world_size) {
        out.refused_rank_steps += rs.count();
        continue;
      }
      std::vector<std::pair<int64_t, std::vector<int64_t>>> decoded;
      std::set<int64_t> profiled;  // steps this rank marked captured (a profiler ran)
      const absl::Status s =
          wire::DecodePackedSteps(rs.packed(), rs.count(), rs.base_step(), stages,
                                  [&](int64_t step, const int64_t* d, uint32_t flags) {
                                    std::vector<int64_t> b(stages + 1, 0);
                                    for (uint32_t k = 0; k < stages; ++k) b[k + 1] = b[k] + d[k];
                                    decoded.emplace_back(step, std::move(b));
                                    if ((flags & shm::v1::kRecordTraceCaptured) != 0) {
                                      profiled.insert(step);
                                    }
                                  });
      if (!s.ok()) {
        out.refused_rank_steps += rs.count();
        continue;
      }
      for (auto& [step, boundaries] : decoded) {
        if (!seen.insert({rs.rank(), step}).second) continue;  // a re-send
        RankStep r;
        r.rank = rs.rank();
        r.boundaries_ns = std::move(boundaries);
        for (const v1::CollectiveInterval& c : rs.collectives()) {
          absl::StatusOr<ProbeSpan> span = SpanFromProto(c);
          if (c.step() != step || !span.ok()) continue;  // logged valid; damage is skipped
          span->stage = StageAt(r.boundaries_ns, span->call_ns);
          r.probe.push_back(*span);
        }
        StepInput& input = run.steps[step];
        input.step = step;
        // As the coordinator's aligner: one rank profiling marks the step captured.
        if (profiled.count(step) > 0) input.captured = true;
        input.ranks.push_back(std::move(r));
        ++run.records;
      }
    }
    return absl::OkStatus();
  });
  if (scan.format == 0 || (scan.records == 0 && !scan.skipped.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a StageFrontier journal",
                                                   scan.error.empty() ? "" : ": ", scan.error));
  }
  if (!scan.error.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", scan.error));
  if (!run.schema.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the job's declaration (first record) is lost"));
  }
  ApplyLayout(layouts, &out);
  for (const JournalRegion& r : scan.skipped) {
    out.skipped_bytes += r.bytes;
    out.notes.push_back(absl::StrCat("skipped ", r.bytes, " damaged bytes at offset ", r.offset,
                                     " (", r.reason, ")"));
  }
  return out;
}

}  // namespace stagefrontier
