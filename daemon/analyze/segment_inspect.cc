#include "daemon/analyze/segment_inspect.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/analyze/run_file.h"
#include "shm/monotonic_clock.h"
#include "shm/open_stage.h"
#include "shm/probe_ring_reader.h"
#include "shm/probe_step_matcher.h"
#include "shm/segment_file.h"
#include "shm/slot_ownership.h"
#include "shm/stage_schema.h"

namespace stagefrontier {
namespace {

const char* StateName(uint32_t state) {
  switch (state) {
    case shm::v1::kSlotFree:
      return "free";
    case shm::v1::kSlotClaiming:
      return "claiming";
    case shm::v1::kSlotActive:
      return "active";
    case shm::v1::kSlotReleased:
      return "released";
  }
  return "corrupt";
}

SlotOpenStage OpenStageOf(const shm::v1::SlotHeader& slot, const shm::SlotReport& r) {
  SlotOpenStage out;
  out.exit_reason = shm::v1::ExitReasonName(slot.exit_reason.load(std::memory_order_acquire));
  shm::OpenStage o;
  out.readable = shm::ReadOpenStage(slot, &o);
  if (!out.readable || !o.known()) return out;
  out.known = true;
  out.between_steps = o.between_steps();
  out.step = o.step;
  if (o.in_stage() && o.stage() < r.stages.size()) out.stage = r.stages[o.stage()].first;
  if (o.in_stage() && out.stage.empty()) out.stage = absl::StrCat("#", o.stage());
  out.age_ns = shm::HeartbeatAgeNs(shm::MonotonicNowNs(), o.since_ns);
  return out;
}

std::string RenderOpenStage(const SlotOpenStage& o, shm::OwnerHealth owner) {
  if (!o.readable) return "open stage unreadable (a write in progress, or its writer died in it)";
  if (!o.known) return "open stage unknown (none published: no step yet, or an older stub)";
  const char* label = owner == shm::OwnerHealth::kAlive ? "" : "last seen: ";
  const double s = o.age_ns / 1e9;
  if (o.between_steps) {
    return absl::StrFormat("%sbetween steps (after step %d), for %.1f s", label, o.step, s);
  }
  return absl::StrFormat("%sopen stage %s of step %d, for %.1f s", label, o.stage, o.step, s);
}

absl::StatusOr<StageSchema> SchemaOf(const shm::SlotReport& r) {
  std::vector<Stage> stages;
  for (const auto& [name, kind] : r.stages) stages.push_back({name, static_cast<StageKind>(kind)});
  return StageSchema::Create(std::move(stages));
}

}  // namespace

absl::StatusOr<SegmentSummary> InspectSegment(const std::string& path, std::ostream* drain_to) {
  absl::StatusOr<std::unique_ptr<shm::MappedSegment>> seg = shm::MappedSegment::Attach(path);
  if (!seg.ok()) return seg.status();
  const shm::SegmentView& view = (*seg)->view();
  SegmentSummary s;
  s.path = path;
  s.job_id = view.job_id();
  s.layout_version = view.layout_version();
  s.creation_time_unix_ns = view.header().creation_time_unix_ns;
  s.creator_pid = view.header().creator_pid;
  s.slot_count = view.slot_count();
  s.ring_capacity = view.ring_capacity();
  s.probe_ring_capacity = view.probe_ring_capacity();
  s.total_bytes = view.total_bytes();
  shm::ReaderOptions options;
  options.on_error = [&s](uint32_t, const std::string& m) { s.errors.push_back(m); };
  shm::SegmentReader reader(view, options);
  reader.RefreshSchemas();
  if (drain_to != nullptr) {
    if (absl::Status lock = (*seg)->LockForReading(); !lock.ok()) return lock;
    // Probe intervals (layout v2) go with the step during which they were called, as the
    // sidecar sends them, placed in the stage of the call.
    shm::ProbeRingReader probes(view, options.on_error);
    shm::ProbeStepMatcher matcher(view.slot_count());
    reader.Drain([&](const shm::DrainedStep& step) {
      const shm::SlotReport r = reader.Report(step.local_rank);
      absl::StatusOr<StageSchema> schema = SchemaOf(r);
      if (!schema.ok()) {
        s.errors.push_back(
            absl::StrCat("local rank ", step.local_rank, ": ", schema.status().message()));
        return;
      }
      RankStep rs;
      rs.rank = step.rank;
      rs.boundaries_ns = step.boundaries_ns;
      matcher.Pull(probes, step.local_rank);
      matcher.Match(step.local_rank, step.boundaries_ns.front(), step.end_ns,
                    [&](const shm::ProbeInterval& p) {
                      ProbeSpan span;
                      span.stage = StageAt(step.boundaries_ns, p.call_ns);
                      span.enter_ns = p.start_ns;
                      span.exit_ns = p.end_ns;
                      span.call_ns = p.call_ns;
                      span.op = p.op;
                      span.bytes = p.bytes;
                      rs.probe.push_back(span);
                    });
      *drain_to << FormatRunRecord(s.job_id, r.world_size, *schema, step.step, rs) << "\n";
      ++s.drained;
    });
  }
  for (const shm::SlotReport& r : reader.Reports()) {
    if (r.state != shm::v1::kSlotFree || r.pending > 0) {
      s.slots.push_back(r);
      s.open.push_back(OpenStageOf(view.slot(r.local_rank), r));
    }
  }
  return s;
}

std::string RenderSegmentText(const SegmentSummary& s) {
  std::string out = absl::StrFormat(
      "segment %s\n  job %s, layout v%u, %u slots x %u records%s, %u bytes, created by pid %u\n",
      s.path, s.job_id, s.layout_version, s.slot_count, s.ring_capacity,
      s.probe_ring_capacity == 0 ? "" : absl::StrCat(", probe rings of ", s.probe_ring_capacity),
      s.total_bytes, s.creator_pid);
  if (s.slots.empty()) absl::StrAppend(&out, "  no slot has been claimed yet\n");
  for (size_t i = 0; i < s.slots.size(); ++i) {
    const shm::SlotReport& r = s.slots[i];
    std::string stages;
    for (const auto& [name, kind] : r.stages) {
      absl::StrAppend(&stages, stages.empty() ? "" : ",", name, ":",
                      StageKindName(static_cast<StageKind>(kind)));
    }
    absl::StrAppend(
        &out,
        absl::StrFormat("  local rank %u: %s, rank %d/%d, owner pid %u (%s), heartbeat %.1f s "
                        "ago, generation %u\n",
                        r.local_rank, StateName(r.state), r.rank, r.world_size, r.owner_pid,
                        shm::OwnerHealthName(r.owner), r.heartbeat_age_ns / 1e9, r.generation),
        absl::StrFormat("    pending %u, read %u, dropped by writer %u, torn %u, invalid %u, "
                        "gap steps %u\n",
                        r.pending, r.records_read, r.dropped_by_writer, r.torn, r.invalid,
                        r.gap_steps));
    if (!stages.empty()) absl::StrAppend(&out, "    schema ", stages, "\n");
    if (i < s.open.size()) {
      absl::StrAppend(&out, "    ", RenderOpenStage(s.open[i], r.owner), "\n");
      if (!s.open[i].exit_reason.empty()) {
        const std::string& why = s.open[i].exit_reason;
        absl::StrAppend(&out, "    exit reason: ", why,
                        why == "exception"
                            ? " (its trainer ended on an uncaught exception, where the open "
                              "stage says)"
                        : why == "collective_exception"
                            ? " (its trainer ended on a collective's error, a peer gone, where "
                              "the open stage says)"
                            : "",
                        "\n");
      }
    }
    if (!r.last_error.empty()) absl::StrAppend(&out, "    last error: ", r.last_error, "\n");
  }
  if (s.drained > 0 || !s.errors.empty()) {
    absl::StrAppend(&out, "  drained ", s.drained, " records\n");
  }
  for (const std::string& e : s.errors) absl::StrAppend(&out, "  error: ", e, "\n");
  return out;
}

std::string RenderSegmentJson(const SegmentSummary& s) {
  nlohmann::json j;
  j["path"] = s.path;
  j["job"] = s.job_id;
  j["layout_version"] = s.layout_version;
  j["creation_time_unix_ns"] = s.creation_time_unix_ns;
  j["creator_pid"] = s.creator_pid;
  j["slot_count"] = s.slot_count;
  j["ring_capacity"] = s.ring_capacity;
  j["probe_ring_capacity"] = s.probe_ring_capacity;
  j["total_bytes"] = s.total_bytes;
  j["drained"] = s.drained;
  j["errors"] = s.errors;
  j["slots"] = nlohmann::json::array();
  for (size_t i = 0; i < s.slots.size(); ++i) {
    const shm::SlotReport& r = s.slots[i];
    nlohmann::json open;
    if (i < s.open.size()) {
      const SlotOpenStage& o = s.open[i];
      open = {{"readable", o.readable}, {"known", o.known}, {"between_steps", o.between_steps},
              {"step", o.step},         {"stage", o.stage}, {"age_ns", o.age_ns}};
    }
    nlohmann::json stages = nlohmann::json::array();
    for (const auto& [name, kind] : r.stages) {
      stages.push_back({name, StageKindName(static_cast<StageKind>(kind))});
    }
    j["slots"].push_back({{"local_rank", r.local_rank},
                          {"state", StateName(r.state)},
                          {"rank", r.rank},
                          {"world_size", r.world_size},
                          {"owner_pid", r.owner_pid},
                          {"owner", shm::OwnerHealthName(r.owner)},
                          {"heartbeat_age_ns", r.heartbeat_age_ns},
                          {"generation", r.generation},
                          {"schema", stages},
                          {"pending", r.pending},
                          {"records_read", r.records_read},
                          {"dropped_by_writer", r.dropped_by_writer},
                          {"torn", r.torn},
                          {"invalid", r.invalid},
                          {"gap_steps", r.gap_steps},
                          {"open", open},
                          {"exit_reason", i < s.open.size() ? s.open[i].exit_reason : ""},
                          {"last_error", r.last_error}});
  }
  return j.dump(2) + "\n";
}

}  // namespace stagefrontier
