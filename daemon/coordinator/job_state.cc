#include "daemon/coordinator/job_state.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "daemon/accounting/group_members.h"
#include "daemon/common/duration_format.h"
#include "daemon/common/log_safe.h"
#include "daemon/common/utf8_prefix.h"
#include "daemon/coordinator/proto_convert.h"
#include "daemon/nodes/node_naming.h"
#include "daemon/nodes/node_shift.h"
#include "daemon/wire/packed_steps.h"
#include "shm/monotonic_clock.h"
#include "shm/record_limits.h"
#include "shm/segment_layout_v1.h"

namespace stagefrontier {
namespace {

constexpr double kNsPerSecond = 1e9;

EngineConfig Merge(EngineConfig base, const v1::ConfigChange& c) {
  if (c.window_steps() != 0) base.window_steps = c.window_steps();
  if (c.excess_z() != 0) base.excess_z = c.excess_z();
  if (c.clear_share() != 0) base.clear_share = c.clear_share();
  if (c.tie_z() != 0) base.tie_z = c.tie_z();
  if (c.noise_floor_ns() != 0) base.noise_floor_ns = c.noise_floor_ns();
  return base;
}

v1::ConfigChange ToChange(const v1::ConfigChanged& c) {
  v1::ConfigChange out;
  out.set_window_steps(c.window_steps());
  out.set_excess_z(c.excess_z());
  out.set_clear_share(c.clear_share());
  out.set_tie_z(c.tie_z());
  out.set_noise_floor_ns(c.noise_floor_ns());
  out.set_stall_after_ms(c.stall_after_ms());
  return out;
}

// The job's own stall limit from a ConfigChange's stall_after_ms (-1: back to the default).
int64_t StallFixedNs(int64_t stall_after_ms) {
  return stall_after_ms > 0 ? stall_after_ms * 1'000'000 : 0;
}

}  // namespace

bool StallLimitOnly(const v1::ConfigChange& c) {
  return c.stall_after_ms() != 0 && c.window_steps() == 0 && c.excess_z() == 0 &&
         c.clear_share() == 0 && c.tie_z() == 0 && c.noise_floor_ns() == 0;
}

std::string JournalPath(const std::string& data_dir, const std::string& job) {
  return absl::StrCat(data_dir, "/", job, ".journal");
}

std::string GenerationName(const std::string& id, uint32_t generation) {
  return generation <= 1 ? id : absl::StrCat(id, "@", generation);
}

bool ParseJobName(const std::string& name, std::string* id, uint32_t* generation) {
  const size_t at = name.find('@');
  *id = name.substr(0, at);
  *generation = 0;
  if (at == std::string::npos) return true;
  const std::string digits = name.substr(at + 1);
  if (digits.empty() || digits.size() > 9 || digits[0] == '0') return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  *generation = static_cast<uint32_t>(std::stoul(digits));
  return true;
}

namespace {

// Open steps hold memory in proportion to the world size: bound the rank-steps they may hold
// (a few seconds of steps for the largest jobs; 1024 steps for jobs up to 4096 ranks).
JobOptions BoundPending(JobOptions o, int32_t world_size) {
  constexpr int64_t kPendingRankSteps = 4 << 20;
  o.aligner.max_pending_steps =
      std::min<int64_t>(o.aligner.max_pending_steps,
                        std::max<int64_t>(8, kPendingRankSteps / std::max<int32_t>(1, world_size)));
  return o;
}

}  // namespace

JobState::JobState(std::string id, uint32_t generation, int32_t world_size, StageSchema schema,
                   const JobOptions& options, CoordinatorMetrics* metrics)
    : id_(std::move(id)),
      generation_(std::max<uint32_t>(1, generation)),
      name_(GenerationName(id_, generation_)),
      world_size_(world_size),
      schema_(std::move(schema)),
      options_(BoundPending(options, world_size)),
      metrics_(metrics),
      aligner_(world_size, static_cast<uint32_t>(schema_.size()), options_.aligner),
      history_({.max_steps = options_.history_steps,
                .stage_count = static_cast<uint32_t>(schema_.size())}),
      ranks_(static_cast<size_t>(world_size)),
      exits_(static_cast<size_t>(world_size)),
      detector_(schema_, {.warmup_steps = options_.engine.warmup_steps}),
      layouts_(static_cast<size_t>(world_size)),
      layouts_unknown_(world_size),
      stall_(&schema_, world_size, options_.stall) {
  last_active_ns_.store(shm::MonotonicNowNs(), std::memory_order_relaxed);
  if (metrics_ != nullptr) m_ = metrics_->ForJob(name_, schema_);
}

JobState::~JobState() {
  if (metrics_ != nullptr) metrics_->DropJob(m_);
}

absl::StatusOr<StageSchema> JobState::CheckNewJob(const v1::RankDeclaration& decl,
                                                  const JobOptions& options) {
  if (!shm::ValidJobId(decl.job())) {
    return absl::InvalidArgumentError(
        absl::StrCat("job id \"", LogSafe(decl.job()),
                     "\" is not 1..63 characters of [A-Za-z0-9_.-] (not starting with '.')"));
  }
  if (decl.world_size() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", decl.job(), ": world size ", decl.world_size(), " is out of range"));
  }
  if (decl.world_size() > options.limits.max_world_size) {
    return absl::ResourceExhaustedError(
        absl::StrCat("job ", decl.job(), ": world size ", decl.world_size(),
                     " is above this coordinator's limit of ", options.limits.max_world_size,
                     " (--max-world-size)"));
  }
  absl::StatusOr<StageSchema> schema = SchemaFromProto(decl.stages());
  if (!schema.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", decl.job(), ": bad schema: ", schema.status().message()));
  }
  return schema;
}

JobShape JobState::ShapeLocked(int64_t window_steps) const {
  return JobShape{.world_size = world_size_,
                  .stages = static_cast<int64_t>(schema_.size()),
                  .window_steps = window_steps,
                  .pending_steps = options_.aligner.max_pending_steps,
                  .history_steps = options_.history_steps,
                  .history_rank_steps = options_.history_rank_steps};
}

absl::Status JobState::ReserveMemory(bool restoring) {
  const int64_t bytes = EstimateJobBytes(ShapeLocked(options_.engine.window_steps));
  if (!restoring && bytes > options_.limits.max_job_memory_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("job ", name_, " (world size ", world_size_, ", ", schema_.size(),
                     " stages, window ", options_.engine.window_steps, ") needs about ",
                     bytes >> 20, " MB; one job may use at most ",
                     options_.limits.max_job_memory_bytes >> 20, " MB (--max-job-memory-mb)"));
  }
  if (options_.budget == nullptr) return absl::OkStatus();
  if (restoring) {
    bool over = false;
    memory_ = options_.budget->ReserveAnyway(bytes, &over);
    return absl::OkStatus();
  }
  absl::StatusOr<MemoryBudget::Reservation> r =
      options_.budget->Reserve(absl::StrCat("job ", name_), bytes);
  if (!r.ok()) return r.status();
  memory_ = *std::move(r);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<JobState>> JobState::Create(const v1::RankDeclaration& decl,
                                                           const JobOptions& options,
                                                           CoordinatorMetrics* metrics,
                                                           uint32_t generation) {
  absl::StatusOr<StageSchema> schema = CheckNewJob(decl, options);
  if (!schema.ok()) return schema.status();
  std::unique_ptr<JobState> job(new JobState(decl.job(), generation, decl.world_size(),
                                             *std::move(schema), options, metrics));
  {
    MutexLock lock(&job->mu_);  // not shared yet: for the lock annotations
    if (absl::Status s = job->ReserveMemory(/*restoring=*/false); !s.ok()) return s;
    if (absl::Status s = job->RebuildEngineLocked(); !s.ok()) return s;
  }
  v1::JournalRecord rec;
  v1::JobDeclared* d = rec.mutable_declared();
  d->set_job(job->id_);
  d->set_world_size(job->world_size_);
  SchemaToProto(job->schema_, d->mutable_stages());
  if (job->generation_ > 1) d->set_generation(job->generation_);
  // Atomic: either a whole journal holding the declaration, or none (a full disk must not
  // leave an empty journal that refuses the job for good).
  absl::StatusOr<std::unique_ptr<JobJournal>> journal = JobJournal::Create(
      JournalPath(options.data_dir, job->name_), options.fsync, std::span(&rec, 1));
  if (!journal.ok()) return journal.status();
  job->journal_ = *std::move(journal);
  return job;
}

absl::StatusOr<std::unique_ptr<JobState>> JobState::Restore(const std::string& path,
                                                            const JobOptions& options,
                                                            CoordinatorMetrics* metrics,
                                                            JournalOpenInfo* info, int64_t now_ns) {
  std::unique_ptr<JobState> job;
  const int64_t now = 0;  // replay never closes steps by deadline: StepClosed records do
  JournalOpenInfo local;
  JournalOpenInfo& opened = info != nullptr ? *info : local;
  absl::StatusOr<std::unique_ptr<JobJournal>> journal = JobJournal::Open(
      path, options.fsync,
      [&](const v1::JournalRecord& rec) -> absl::Status {
        if (!job) {
          if (rec.body_case() != v1::JournalRecord::kDeclared) {
            return absl::DataLossError("its declaration (the first record) is lost");
          }
          const v1::JobDeclared& d = rec.declared();
          absl::StatusOr<StageSchema> schema = SchemaFromProto(d.stages());
          if (!schema.ok() || !shm::ValidJobId(d.job()) || d.world_size() <= 0 ||
              d.world_size() > (1 << 24)) {
            return absl::DataLossError("its declaration (the first record) is not a valid job");
          }
          job.reset(new JobState(d.job(), d.generation(), d.world_size(), *std::move(schema),
                                 options, metrics));
          MutexLock lock(&job->mu_);  // not shared yet: for the lock annotations
          return job->RebuildEngineLocked();
        }
        MutexLock lock(&job->mu_);
        // One record that cannot be applied (damage that passed the checksum, a setting a
        // newer build refuses) costs that record, not the job.
        if (!job->Apply(rec, now, /*replaying=*/true).ok()) ++job->replay_skipped_;
        return absl::OkStatus();
      },
      &opened);
  if (!journal.ok()) {
    if (IsNoIntactRecord(journal.status())) return journal.status();  // names the path
    return absl::Status(journal.status().code(),
                        absl::StrCat("journal ", path, ": ", journal.status().message()));
  }
  if (!job) {
    return absl::DataLossError(
        absl::StrCat("journal ", path, ": its declaration (the first record) is lost"));
  }
  if (metrics != nullptr) {
    metrics->journal_truncated_bytes().Increment(static_cast<double>(opened.skipped_bytes));
  }
  job->journal_ = *std::move(journal);
  MutexLock lock(&job->mu_);
  (void)job->ReserveMemory(/*restoring=*/true);
  // Regression: replayed steps kept arrival time 0, so the first deadline check after a
  // restart closed them as partial at once.
  job->aligner_.RestartDeadlines(now_ns);
  return job;
}

absl::StatusOr<std::unique_ptr<JobState>> JobState::Salvage(const std::string& path,
                                                            const v1::RankDeclaration& decl,
                                                            const JobOptions& options,
                                                            CoordinatorMetrics* metrics,
                                                            JournalOpenInfo* info, int64_t now_ns) {
  absl::StatusOr<StageSchema> schema = CheckNewJob(decl, options);
  if (!schema.ok()) return schema.status();
  v1::JournalRecord rec;
  v1::JobDeclared* d = rec.mutable_declared();
  d->set_job(decl.job());
  d->set_world_size(decl.world_size());
  SchemaToProto(*schema, d->mutable_stages());
  if (absl::Status s = JobJournal::Salvage(path, options.fsync, rec, info); !s.ok()) return s;
  JournalOpenInfo reopened;
  absl::StatusOr<std::unique_ptr<JobState>> job =
      Restore(path, options, metrics, &reopened, now_ns);
  if (job.ok() && info != nullptr) info->records = reopened.records;
  return job;
}

JobConfig JobState::EngineJobConfigLocked() const {
  return JobConfig{.schema = schema_,
                   .world_size = world_size_,
                   .groups = layout_groups_.groups,
                   .group_names = layout_groups_.names,
                   .groups_are_roles = !layout_groups_.groups.empty(),
                   .engine = options_.engine,
                   .probe_bracket_rules = probe_rules_,
                   .group_pipeline_stages = layout_groups_.pipeline_stages};
}

absl::Status JobState::RebuildEngineLocked() {
  probe_rules_ = options_.probe_bracket_rules;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(EngineJobConfigLocked());
  if (!engine.ok() && !probe_rules_.empty()) {
    // The coordinator's rules name stages this job does not have: use the default rules.
    probe_rules_note_ = absl::StrCat("--probe-bracket \"", probe_rules_,
                                     "\" does not fit this job: ", engine.status().message(),
                                     "; using the default (sync and mixed stages)");
    probe_rules_.clear();
    engine = Engine::Create(EngineJobConfigLocked());
  }
  if (!engine.ok()) return engine.status();
  engine_ = *std::move(engine);
  probe_counted_.clear();  // the new engine counts from zero
  return absl::OkStatus();
}

absl::Status JobState::DecodeCollectivesLocked(const v1::RankSteps& rs) {
  decoded_probe_.assign(decoded_steps_.size(), {});
  for (int i = 0; i < rs.collectives_size(); ++i) {
    const v1::CollectiveInterval& c = rs.collectives(i);
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job ", name_, " rank ", rs.rank(), ": collective ", i, " (step ", c.step(), "): ", why));
    };
    // Steps of one message are consecutive from base_step (packed_steps.h).
    const int64_t index = c.step() - rs.base_step();
    if (index < 0 || index >= static_cast<int64_t>(decoded_steps_.size()) ||
        decoded_steps_[static_cast<size_t>(index)] != c.step()) {
      return bad("names a step this message does not carry");
    }
    absl::StatusOr<ProbeSpan> span = SpanFromProto(c);
    if (!span.ok()) return bad(std::string(span.status().message()));
    decoded_probe_[static_cast<size_t>(index)].push_back(*span);
  }
  return absl::OkStatus();
}

absl::Status JobState::Apply(const v1::JournalRecord& rec, int64_t now_ns, bool replaying) {
  switch (rec.body_case()) {
    case v1::JournalRecord::kRanks:
      for (const v1::RankSteps& rs : rec.ranks().steps()) {
        // Journaled records were valid when logged; a failure here is damage: skip it.
        if (!AlignLocked(rs, "", now_ns).ok()) ++replay_skipped_;
      }
      return absl::OkStatus();
    case v1::JournalRecord::kClosed:
      AccountLocked(rec.closed().step(), now_ns, replaying);
      return absl::OkStatus();
    case v1::JournalRecord::kConfig: {
      if (rec.config().stall_after_ms() != 0) {
        stall_.set_fixed_ns(StallFixedNs(rec.config().stall_after_ms()));
      }
      if (StallLimitOnly(ToChange(rec.config()))) return absl::OkStatus();
      // A setting this build refuses (journals written before thresholds were checked may
      // hold inf) is skipped, keeping the job's current settings.
      const EngineConfig merged = Merge(options_.engine, ToChange(rec.config()));
      if (absl::Status s = merged.Validate(); !s.ok()) return s;
      options_.engine = merged;
      return RebuildEngineLocked();
    }
    case v1::JournalRecord::kPause:
      paused_ = rec.pause().paused();
      return absl::OkStatus();
    case v1::JournalRecord::kDropped:
      aligner_.Drop(rec.dropped().step());
      return absl::OkStatus();
    case v1::JournalRecord::kOwner:
      OwnerLocked(rec.owner());
      return absl::OkStatus();
    case v1::JournalRecord::kStall:
      stall_.Restore(rec.stall().stall());
      AppendStallEventLocked(rec.stall().stall(), /*replaying=*/true);
      return absl::OkStatus();
    case v1::JournalRecord::kDeclared:
      return absl::DataLossError("a second JobDeclared record");  // skipped by Restore
    default:
      return absl::DataLossError("an unknown journal record");
  }
}

absl::Status JobState::CheckDeclaration(const v1::RankDeclaration& decl) const {
  if (decl.rank() < 0 || decl.rank() >= world_size_) {
    return absl::OutOfRangeError(absl::StrCat("job ", name_, ": rank ", decl.rank(),
                                              " is outside world size ", world_size_));
  }
  if (decl.world_size() != world_size_) {
    return absl::FailedPreconditionError(absl::StrCat("job ", name_, ": rank ", decl.rank(),
                                                      " declares world size ", decl.world_size(),
                                                      ", the job has ", world_size_));
  }
  absl::StatusOr<StageSchema> schema = SchemaFromProto(decl.stages());
  if (!schema.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", name_, ": rank ", decl.rank(),
                     " declares a bad schema: ", schema.status().message()));
  }
  if (!(*schema == schema_)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", name_, ": rank ", decl.rank(), " declares schema \"",
                     schema->ToString(), "\", the job has \"", schema_.ToString(), "\""));
  }
  return absl::OkStatus();
}

bool JobState::OwnerLocked(const v1::RankOwned& owner) {
  if (owner.rank() < 0 || owner.rank() >= world_size_ || owner.owner_generation() == 0) {
    return false;
  }
  RankHealthState& h = ranks_[owner.rank()];
  std::string process = absl::StrCat(Utf8Prefix(owner.node(), 256), "#", owner.owner_generation());
  if (process == h.process) return false;
  // The first process seen is not a restart; another one after steps may be.
  if (!h.process.empty() && aligner_.last_step(owner.rank()) >= 0) h.restarted = true;
  h.process = std::move(process);
  // The process's node: known in replay too, so node verdicts replay as they were told.
  if (!owner.node().empty()) h.node = Utf8Prefix(owner.node(), 256);
  NoteLayoutLocked(owner.rank(), LayoutFromProto(owner.layout()));
  return true;
}

void JobState::NoteLayoutLocked(int32_t rank, const DeclaredLayout& layout) {
  const bool first = layouts_[rank].state == DeclaredLayout::State::kUnknown;
  layouts_[rank] = layout;
  if (first) --layouts_unknown_;
  // While ranks are still to declare, a first declaration shaped like the reference's cannot
  // change the outcome, and a refusal holds until every rank has declared: skip the O(world)
  // pass, which 16,384 declarations would make quadratic.
  if (first && layouts_unknown_ > 0) {
    if (layout_reference_ < 0) {
      layout_reference_ = rank;
    } else if (!detector_.layout_problem().empty() ||
               SameShape(layout, layouts_[layout_reference_])) {
      return;
    }
  }
  ApplyLayoutLocked();
}

void JobState::ApplyLayoutLocked() {
  absl::StatusOr<LayoutGroups> next = GroupsFromLayout(layouts_);
  std::string problem;
  if (!next.ok()) {
    problem = absl::StrCat("job ", name_, ": ", next.status().message());
    next = LayoutGroups{};
  } else if (next->pending) {
    return;  // wait for every rank's declaration
  }
  detector_.set_layout_problem(std::move(problem));  // the verdicts and `sfctl health` say it
  if (next->groups == layout_groups_.groups && next->names == layout_groups_.names) return;
  layout_groups_ = *std::move(next);
  // Empty: one group (a vector of zeros would make the detector judge it as roles).
  detector_.set_groups(layout_groups_.groups.empty()
                           ? std::vector<int32_t>{}
                           : GroupOfRank(layout_groups_.groups, world_size_));
  if (absl::Status s = RebuildEngineLocked(); !s.ok()) {
    detector_.set_layout_problem(
        absl::StrCat("job ", name_, ": the engine refused the layout's groups: ", s.message()));
    layout_groups_ = LayoutGroups{};
    detector_.set_groups({});
    (void)RebuildEngineLocked();
  }
}

void JobState::NoteOwner(const v1::RankDeclaration& decl, const std::string& node) {
  last_active_ns_.store(shm::MonotonicNowNs(), std::memory_order_relaxed);  // a new process
  v1::JournalRecord rec;
  v1::RankOwned* o = rec.mutable_owner();
  o->set_rank(decl.rank());
  o->set_node(node);
  o->set_owner_generation(decl.owner_generation());
  if (decl.has_layout()) *o->mutable_layout() = decl.layout();
  MutexLock lock(&mu_);
  if (OwnerLocked(*o)) journal_->Append(rec);
}

absl::StatusOr<IngestCounts> JobState::AlignLocked(const v1::RankSteps& rs, const std::string& node,
                                                   int64_t now_ns) {
  if (rs.rank() < 0 || rs.rank() >= world_size_) {
    return absl::OutOfRangeError(
        absl::StrCat("job ", name_, ": rank ", rs.rank(), " is outside world size ", world_size_));
  }
  // Decode the whole message before keeping any of it (one pass, into reused buffers).
  const uint32_t stages = static_cast<uint32_t>(schema_.size());
  decoded_steps_.clear();
  decoded_durations_.clear();
  decoded_flags_.clear();
  // The callback runs inside DecodePackedSteps, under this function's lock.
  auto keep = [&](int64_t step, const int64_t* d, uint32_t flags)
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                    decoded_steps_.push_back(step);
                    decoded_durations_.insert(decoded_durations_.end(), d, d + stages);
                    decoded_flags_.push_back(flags);
                  };
  absl::Status s = wire::DecodePackedSteps(rs.packed(), rs.count(), rs.base_step(), stages, keep);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", name_, " rank ", rs.rank(), ": ", s.message()));
  }
  if (absl::Status p = DecodeCollectivesLocked(rs); !p.ok()) return p;
  IngestCounts c;
  for (size_t i = 0; i < decoded_steps_.size(); ++i) {
    const int64_t step = decoded_steps_[i];
    switch (aligner_.Add(rs.rank(), step, &decoded_durations_[i * stages], decoded_flags_[i],
                         now_ns, std::move(decoded_probe_[i]))) {
      case AlignOutcome::kAccepted:
        ++c.accepted;
        if ((decoded_flags_[i] & shm::v1::kRecordSelfTestDelay) != 0) ++c.selftest_marked;
        break;
      case AlignOutcome::kDuplicate:
        ++c.duplicates;
        break;
      case AlignOutcome::kLate:
        ++c.late;
        break;
      case AlignOutcome::kFarAhead:
        if (c.far_ahead++ == 0) {
          c.far_ahead_step = step;
          c.job_step = std::max(aligner_.last_closed(), aligner_.newest_step());
        }
        break;
    }
  }
  RankHealthState& h = ranks_[rs.rank()];
  if (!node.empty()) h.node = Utf8Prefix(node, 256);
  h.accepted += c.accepted;
  h.duplicates += c.duplicates;
  h.late += c.late;
  h.rejected += c.far_ahead;
  if (m_.rank_steps_accepted != nullptr) {
    // Each Increment is a compare-and-swap loop on a shared double, 4 per message at 100,000
    // messages a second; the last three are almost always 0.
    m_.rank_steps_accepted->Increment(c.accepted);
    if (c.duplicates > 0) m_.rank_steps_duplicate->Increment(c.duplicates);
    if (c.late > 0) m_.rank_steps_late->Increment(c.late);
    if (c.far_ahead > 0) m_.rank_steps_rejected->Increment(c.far_ahead);
  }
  return c;
}

absl::StatusOr<IngestCounts> JobState::Ingest(const v1::RankSteps& rs, const std::string& node,
                                              int64_t now_ns, uint64_t stream) {
  MutexLock lock(&mu_);
  if (rs.count() > 0) last_active_ns_.store(now_ns, std::memory_order_relaxed);
  stall_.NoteAlive(rs.rank(), now_ns, stream);
  if (rs.rank() >= 0 && rs.rank() < world_size_ && ranks_[rs.rank()].restarted) {
    RankHealthState& h = ranks_[rs.rank()];
    const int64_t first = rs.base_step();  // packed steps start at base_step (packed_steps.h)
    const int64_t last = aligner_.last_step(rs.rank());
    if (rs.count() > 0 && first >= 0 && first <= last) {
      IngestCounts c;
      c.new_run = true;
      c.new_run_step = first;
      c.previous_step = last;
      return c;
    }
    h.restarted = false;  // the new process goes on where the old one stopped: the same run
  }
  absl::StatusOr<IngestCounts> c = AlignLocked(rs, node, now_ns);
  if (!c.ok()) {
    if (rs.rank() >= 0 && rs.rank() < world_size_) ++ranks_[rs.rank()].rejected;
    if (m_.rank_steps_rejected != nullptr) m_.rank_steps_rejected->Increment(rs.count());
    return c;
  }
  // Logged as received, duplicates included: replay makes the same decisions again (records
  // refused as far ahead are logged too, so that replay refuses them again).
  if (c->accepted > 0 || c->late > 0 || c->far_ahead > 0) journal_->AppendRankSteps(rs);
  return c;
}

void JobState::AccountLocked(int64_t step, int64_t now_ns, bool replaying) {
  const int64_t arrived = aligner_.oldest_first_arrival_ns();
  StepInput input = aligner_.Close(step);
  if (input.ranks.empty()) return;
  if (input.captured) {
    CountCapturedLocked(step);
    aligner_.Recycle(std::move(input));
    return;
  }
  if (absl::Status s = engine_->AddStep(input); !s.ok()) {
    if (m_.steps_rejected != nullptr) m_.steps_rejected->Increment();
    aligner_.Recycle(std::move(input));
    return;
  }
  const StepAccounting& acc = *engine_->LastStep();
  ++steps_accounted_;
  last_step_ = step;
  if (acc.partial) ++partial_steps_;
  KeepStepLocked(acc, std::move(input));
  stall_.NoteStepTime(acc.exposed_ns);
  const bool delay_known = !replaying && arrived > 0 && now_ns >= arrived;
  CountStepLocked(acc, delay_known ? now_ns - arrived : -1);
  VerdictsLocked(replaying);
}

void JobState::CountCapturedLocked(int64_t step) {
  // Profiled ranks are slower for the profiler's sake: the step is closed and counted, and
  // left out of the evidence (and of the history re-accounted on request).
  ++steps_accounted_;
  ++captured_steps_;
  last_step_ = step;
  // Kept for the windows' spans ("6 profiled steps left out"); captures are short and rare.
  profiled_steps_.push_back(step);
  if (profiled_steps_.size() > 4096) profiled_steps_.pop_front();
  if (m_.steps_captured != nullptr) m_.steps_captured->Increment();
}

void JobState::KeepStepLocked(const StepAccounting& acc, StepInput input) {
  v1::StepSummary summary;
  StepToProto(schema_, acc, &summary);
  history_.Add(std::move(summary));
  detector_.AddStep(input, acc.partial);
  inputs_rank_steps_ += static_cast<int64_t>(input.ranks.size());
  inputs_.push_back(std::move(input));
  while (inputs_rank_steps_ > options_.history_rank_steps && inputs_.size() > 1) {
    inputs_rank_steps_ -= static_cast<int64_t>(inputs_.front().ranks.size());
    aligner_.Recycle(std::move(inputs_.front()));  // its buffers serve the next step closed
    inputs_.pop_front();
  }
}

void JobState::CountStepLocked(const StepAccounting& acc, int64_t delay_ns) {
  if (m_.steps_complete == nullptr) return;
  (acc.partial ? m_.steps_partial : m_.steps_complete)->Increment();
  m_.exposed_step_seconds->Set(acc.exposed_ns / kNsPerSecond);
  for (size_t k = 0; k < acc.stages.size(); ++k) {
    m_.stage_exposed_seconds[k]->Increment(acc.stages[k].increment_ns / kNsPerSecond);
    if (acc.stages[k].excess_ns > 0) {
      m_.stage_excess_seconds[k]->Increment(acc.stages[k].excess_ns / kNsPerSecond);
    }
  }
  if (delay_ns >= 0) m_.verdict_delay_seconds->Observe(delay_ns / kNsPerSecond);
  CountProbeBracketsLocked(acc.stages.size());
}

void JobState::CountProbeBracketsLocked(size_t stages) {
  // Counters follow the engine's running totals (which restart with a rebuilt engine).
  const ProbeBracketing& b = engine_->bracketing();
  probe_counted_.resize(2 * stages, 0);
  for (size_t k = 0; k < stages; ++k) {
    const uint64_t ok = b.stage_checked(k) - b.stage_violations(k);
    const uint64_t bad = b.stage_violations(k);
    if (ok > probe_counted_[2 * k]) {
      m_.probe_bracketed[k]->Increment(static_cast<double>(ok - probe_counted_[2 * k]));
    }
    if (bad > probe_counted_[2 * k + 1]) {
      m_.probe_violations[k]->Increment(static_cast<double>(bad - probe_counted_[2 * k + 1]));
    }
    probe_counted_[2 * k] = ok;
    probe_counted_[2 * k + 1] = bad;
  }
}

void JobState::VerdictsLocked(bool replaying) {
  std::vector<Verdict> closed = engine_->TakeClosedVerdicts();
  if (closed.empty()) return;
  JudgeDetectorLocked();
  const std::vector<std::string> rank_nodes = RankNodesLocked();
  for (Verdict& v : closed) {
    if (v.group == "job") NameNodeLocked(rank_nodes, &v);
    v1::VerdictEvent ev = VerdictEventLocked(v);
    if (v.group == "job" || last_label_.empty()) last_label_ = LabelText(v);
    CountVerdictLocked(v);
    // Replayed windows were told before the restart (the node ledger has its own file).
    // A superseded run's late windows concern processes that are gone: no capture, no charge.
    if (!replaying && !superseded() && v.group == "job" && !options_.observers.empty()) {
      const ClosedJobWindow window = ClosedWindowLocked(v, ev);
      for (VerdictObserver* o : options_.observers) o->OnJobWindow(window);
    }
    verdicts_.push_back(std::move(ev));
    while (verdicts_.size() > options_.verdicts_kept) verdicts_.pop_front();
  }
  for (VerdictObserver* o : options_.observers) o->OnVerdictsAppended();
}

v1::VerdictEvent JobState::VerdictEventLocked(const Verdict& v) {
  v1::VerdictEvent ev;
  ev.set_seq(++verdict_seq_);
  VerdictToProto(schema_, v, v.group == "job" ? world_size_ - 1 : 0, ev.mutable_verdict());
  if (v.steps > 0) {
    ev.mutable_verdict()->set_profiled_steps_left_out(
        ProfiledLeftOutLocked(v.first_step, v.last_step));
  }
  for (const DetectorCondition& c : detector_.current()) {
    ev.mutable_verdict()->add_unreliable(c.name);
  }
  return ev;
}

void JobState::CountVerdictLocked(const Verdict& v) {
  if (m_.verdicts_healthy == nullptr) return;
  if (v.label == VerdictLabel::kHealthy) m_.verdicts_healthy->Increment();
  if (v.label == VerdictLabel::kClear) m_.verdicts_clear->Increment();
  if (v.label == VerdictLabel::kAmbiguous && v.reason != AmbiguityReason::kNone) {
    m_.verdicts_ambiguous[static_cast<size_t>(v.reason)]->Increment();
  }
  m_.window_label->Set(static_cast<double>(v.label));
  for (prometheus::Gauge* g : m_.top_suspect_rank) g->Set(-1);
  std::vector<bool> seen(schema_.size(), false);
  for (const Suspect& sus : v.suspects) {
    if (sus.stage >= 0 && static_cast<size_t>(sus.stage) < seen.size() && !seen[sus.stage]) {
      seen[sus.stage] = true;
      m_.top_suspect_rank[sus.stage]->Set(sus.rank);
    }
  }
}

ClosedJobWindow JobState::ClosedWindowLocked(const Verdict& v, const v1::VerdictEvent& ev) const {
  ClosedJobWindow w;
  // The id the stubs know: captures are asked of, and answered by, the current run's ranks.
  w.job = id_;
  w.world_size = world_size_;
  w.verdict = &v;
  w.schema = &schema_;
  w.unreliable.assign(ev.verdict().unreliable().begin(), ev.verdict().unreliable().end());
  w.rank_nodes = RankNodesLocked();
  w.rank_can_capture.reserve(ranks_.size());
  for (const RankHealthState& r : ranks_) w.rank_can_capture.push_back(r.can_capture);
  w.newest_step = std::max(aligner_.last_closed(), aligner_.newest_step());
  w.job_control = JobControlLocked();
  w.now_ns = shm::MonotonicNowNs();
  w.wall_time_ns = shm::RealtimeNowNs();
  return w;
}

void JobState::NameNodeLocked(const std::vector<std::string>& rank_nodes, Verdict* v) const {
  std::span<const int32_t> deciding;
  for (size_t g = 0; g < layout_groups_.names.size(); ++g) {
    if (layout_groups_.names[g] == v->sync_group) deciding = layout_groups_.groups[g];
  }
  RankPlacement placement{.rank_nodes = rank_nodes, .group_of_rank = {}};
  if (!layout_groups_.groups.empty()) {
    placement.group_of_rank = GroupOfRank(layout_groups_.groups, world_size_);
  }
  std::vector<const StepInput*> window;
  if (v->steps > 0) {
    VisitHeldInputsLocked(v->first_step, v->last_step, [&](const StepInput& s) {
      window.push_back(&s);
      return true;
    });
  }
  const EngineConfig& e = options_.engine;
  NameNode(schema_, placement, deciding, window,
           NodeShiftThresholds{.z_strong = e.rank_z_strong,
                               .z_support = e.rank_z_support,
                               .material_fraction = e.rank_material_fraction,
                               .min_flagged_steps = e.min_flagged_steps,
                               .healthy_fraction = e.healthy_fraction},
           v);
}

std::vector<std::string> JobState::RankNodesLocked() const {
  std::vector<std::string> nodes(ranks_.size());
  for (size_t r = 0; r < ranks_.size(); ++r) nodes[r] = ranks_[r].node;
  return nodes;
}

int JobState::CloseDue(int64_t now_ns) {
  MutexLock lock(&mu_);
  int closed = 0;
  // A step far ahead of the job's own numbering that stays open while the job goes on came
  // from a corrupt step number: drop it so it stops making every rank look behind.
  for (int64_t orphan : aligner_.Orphans()) {
    v1::JournalRecord rec;
    rec.mutable_dropped()->set_step(orphan);  // so that replay drops it at the same point
    journal_->Append(rec);
    const int64_t rank_steps = aligner_.Drop(orphan);
    if (m_.rank_steps_rejected != nullptr) {
      m_.rank_steps_rejected->Increment(static_cast<double>(rank_steps));
    }
  }
  while (std::optional<int64_t> step = aligner_.NextClosable(now_ns)) {
    v1::JournalRecord rec;
    rec.mutable_closed()->set_step(*step);
    journal_->Append(rec);
    AccountLocked(*step, now_ns, /*replaying=*/false);
    ++closed;
  }
  // Counting rank conditions walks every rank: once per closed step, or every 250 ms, not at
  // every batch (12,500 sidecar batches per step at 100,000 ranks made it quadratic).
  if (closed > 0 || gauges_updated_ns_ < 0 || now_ns - gauges_updated_ns_ >= 250'000'000) {
    gauges_updated_ns_ = now_ns;
    UpdateRankGaugesLocked();
  }
  return closed;
}

absl::Status JobState::Flush() { return journal_->Flush(); }

absl::StatusOr<JournalCompaction> JobState::CompactJournal(const JournalCompactorOptions& options) {
  return CompactLiveJournal(*journal_, static_cast<uint32_t>(schema_.size()), options);
}

int64_t JobState::StepsBehindLocked(int32_t rank) const {
  const int64_t last = aligner_.last_step(rank);
  return last < 0 ? 0 : std::max<int64_t>(0, aligner_.newest_step() - last);
}

void JobState::NoteRefused(int32_t rank, const std::string& node, absl::string_view why,
                           uint64_t records) {
  MutexLock lock(&mu_);
  if (rank < 0 || rank >= world_size_) return;  // a rank outside the job: nothing to show it on
  RankHealthState& h = ranks_[rank];
  h.refused = Utf8Prefix(why, 300);
  h.rejected += records;
  if (h.node.empty()) h.node = Utf8Prefix(node, 256);
}

bool JobState::FinishedLocked(int32_t rank) const {
  // Its stub released the slot cleanly (owner "none", no exit reason: a trainer that ended on
  // an uncaught exception left mid-step) after reporting, and the sidecar read everything: it
  // will send nothing more, and is not missing for that.
  return exits_[rank].released && aligner_.last_step(rank) >= 0;
}

const char* JobState::ConditionLocked(int32_t rank) const {
  if (FinishedLocked(rank)) return "finished";
  switch (aligner_.rank_state(rank)) {
    case RankState::kUnseen:
      return ranks_[rank].refused.empty() ? "unseen" : "refused";
    case RankState::kMissing:
      return "missing";
    case RankState::kReporting:
      break;
  }
  return StepsBehindLocked(rank) > options_.lagging_steps ? "lagging" : "reporting";
}

JobState::RankCounts JobState::CountRanksLocked() const {
  RankCounts n;
  for (int32_t r = 0; r < world_size_; ++r) {
    const std::string_view c = ConditionLocked(r);
    n.reporting += c == "reporting";
    n.lagging += c == "lagging";
    n.missing += c == "missing";
    n.finished += c == "finished";
  }
  return n;
}

const char* JobState::JobConditionLocked() const {
  return AllRanksFinishedLocked() ? "finished" : "running";
}

bool JobState::AllRanksFinishedLocked() const {
  if (world_size_ <= 0) return false;
  if (all_finished_) return true;
  for (int32_t i = 0; i < world_size_; ++i) {
    const int32_t r = (unfinished_hint_ + i) % world_size_;
    if (!FinishedLocked(r)) {
      unfinished_hint_ = r;
      return false;
    }
  }
  all_finished_ = true;
  return true;
}

int32_t JobState::ProfiledLeftOutLocked(int64_t first, int64_t last) const {
  const auto from = std::lower_bound(profiled_steps_.begin(), profiled_steps_.end(), first);
  const auto to = std::upper_bound(profiled_steps_.begin(), profiled_steps_.end(), last);
  return from < to ? static_cast<int32_t>(to - from) : 0;
}

void JobState::UpdateRankGaugesLocked() const {
  if (m_.ranks_reporting == nullptr) return;
  const RankCounts n = CountRanksLocked();
  m_.ranks_reporting->Set(n.reporting);
  m_.ranks_lagging->Set(n.lagging);
  m_.ranks_missing->Set(n.missing);
  if (m_.ranks_finished != nullptr) m_.ranks_finished->Set(n.finished);
}

void JobState::SidecarStreamEnded(int32_t rank, uint64_t stream) {
  MutexLock lock(&mu_);
  stall_.SourceGone(rank, stream);
}

namespace {
// What a slot's health may make a rank hold (UpdateStubHealth): names the sidecar says (an
// owner's state, a probe backend) and its last error.
constexpr size_t kMaxRelayedNameBytes = 64;
constexpr size_t kMaxRelayedErrorBytes = 512;
}  // namespace

void JobState::UpdateStubHealth(const v1::SlotHealth& health, const std::string& node,
                                uint64_t stream) {
  MutexLock lock(&mu_);
  if (health.rank() < 0 || health.rank() >= world_size_) return;
  const int64_t now = shm::MonotonicNowNs();
  // A released slot is reported until it is reused: only a live owner keeps the job active.
  if (health.owner() == "alive" || health.owner() == "silent") {
    last_active_ns_.store(now, std::memory_order_relaxed);
  }
  stall_.NotePosition(health.rank(), health, node, now, stream);
  RankHealthState& h = ranks_[health.rank()];
  h.node = node;
  // Stub counters only grow within one owner; a new owner restarts them.
  const auto grow = [](uint64_t* mine, uint64_t theirs, prometheus::Counter* c) {
    if (theirs > *mine && c != nullptr) c->Increment(static_cast<double>(theirs - *mine));
    *mine = theirs;
  };
  grow(&h.dropped, health.dropped_by_writer(), m_.stub_dropped);
  grow(&h.torn, health.torn(), m_.stub_torn);
  grow(&h.invalid, health.invalid(), m_.stub_invalid);
  h.clock_backwards = health.clock_backwards();
  h.clock_ahead = health.clock_ahead();
  // Relayed strings are bounded: a sidecar's message may be 16 MiB, held for every rank.
  h.probe_backend = Utf8Prefix(health.probe_backend(), kMaxRelayedNameBytes);
  h.probe_intervals = health.probe_intervals();
  h.probe_dropped = health.probe_dropped();
  h.owner = Utf8Prefix(health.owner(), kMaxRelayedNameBytes);
  h.pending = health.pending();
  RankExit& exit = exits_[health.rank()];
  exit.raised_in_collective =
      health.exit_reason() == shm::v1::ExitReasonName(shm::v1::kExitCollectiveException);
  exit.raised = exit.raised_in_collective ||
                health.exit_reason() == shm::v1::ExitReasonName(shm::v1::kExitException);
  exit.dead = h.owner == "dead";
  exit.released = h.owner == "none" && !exit.raised && h.pending == 0;
  h.last_error = Utf8Prefix(health.last_error(), kMaxRelayedErrorBytes);
  // A name from the sidecar: kept only if it is one the slot can say.
  h.layout_source =
      shm::v1::LayoutSourceName(shm::v1::LayoutSourceFromName(health.layout_source()));
  h.can_capture = health.capture_handler() ? 1 : 0;
  if (!FinishedLocked(health.rank())) {
    // Owner and pending change only here: a rank back from finished is seen here first.
    all_finished_ = false;
    unfinished_hint_ = health.rank();
  }
  // Every stub exited cleanly: tell the observers once (a capture after the last step is
  // then missed, not in flight forever). A rank that comes back makes it running again.
  const bool finished = std::string_view(JobConditionLocked()) == "finished";
  if (finished && !finished_told_ && !superseded()) {
    const int64_t last = std::max(aligner_.last_closed(), aligner_.newest_step());
    for (VerdictObserver* o : options_.observers) {
      o->OnJobFinished(id_, last, shm::MonotonicNowNs());
    }
  }
  finished_told_ = finished;
}

void JobState::CheckStall(int64_t now_ns) {
  MutexLock lock(&mu_);
  if (superseded()) {
    // An earlier run: its processes are gone. A stall it was in ends here, and its gauge with
    // it (an alarm must not outlive the run).
    if (m_.stalled_seconds != nullptr) m_.stalled_seconds->Set(0);
    if (std::optional<v1::Stall> ended = stall_.Close(shm::RealtimeNowNs())) {
      ended->set_text(absl::StrCat(ended->text(), "; the job id started a new run"));
      v1::JournalRecord rec;
      *rec.mutable_stall()->mutable_stall() = *ended;
      journal_->Append(rec);
      AppendStallEventLocked(*ended, /*replaying=*/false);
    }
    return;
  }
  std::vector<RankLiveness> live(static_cast<size_t>(world_size_));
  for (int32_t r = 0; r < world_size_; ++r) {
    live[r].finished = FinishedLocked(r);
    // Ended on an uncaught exception: gone, as a killed process is, whether it released the
    // slot or still hangs in its exit (a collective library's teardown can).
    live[r].raised = exits_[r].raised;
    live[r].raised_in_collective = exits_[r].raised_in_collective;
    live[r].process_gone = exits_[r].dead || live[r].raised;
  }
  const std::optional<v1::Stall> event =
      stall_.Check(now_ns, std::max(aligner_.last_closed(), aligner_.newest_step()), live, paused_,
                   shm::RealtimeNowNs());
  if (m_.stalled_seconds != nullptr) {
    const v1::Stall* s = stall_.current();
    m_.stalled_seconds->Set(s != nullptr && s->alarm() ? static_cast<double>(s->stalled_ns()) / 1e9
                                                       : 0.0);
  }
  if (!event) return;
  v1::JournalRecord rec;
  *rec.mutable_stall()->mutable_stall() = *event;
  journal_->Append(rec);
  AppendStallEventLocked(*event, /*replaying=*/false);
  const int64_t wall = shm::RealtimeNowNs();
  for (VerdictObserver* o : options_.observers) o->OnJobStall(id_, *event, wall);
}

void JobState::AppendStallEventLocked(const v1::Stall& stall, bool replaying) {
  v1::VerdictEvent ev;
  ev.set_seq(++verdict_seq_);
  v1::Verdict* v = ev.mutable_verdict();
  v->set_group("job");
  v->set_first_step(stall.frontier_step());
  v->set_last_step(stall.frontier_step());
  StallVerdictLocked(stall, v);
  verdicts_.push_back(std::move(ev));
  while (verdicts_.size() > options_.verdicts_kept) verdicts_.pop_front();
  if (!replaying) {
    for (VerdictObserver* o : options_.observers) o->OnVerdictsAppended();
  }
}

int64_t JobState::NewestStep() const {
  MutexLock lock(&mu_);
  return std::max(aligner_.last_closed(), aligner_.newest_step());
}

void JobState::Info(v1::JobInfo* out) const {
  MutexLock lock(&mu_);
  out->set_job(name_);
  out->set_job_id(id_);
  out->set_generation(generation_);
  out->set_current(!superseded());
  out->set_world_size(world_size_);
  SchemaToProto(schema_, out->mutable_stages());
  out->set_steps_accounted(steps_accounted_);
  out->set_partial_steps(partial_steps_);
  out->set_captured_steps(captured_steps_);
  out->set_last_step(last_step_);
  const RankCounts n = CountRanksLocked();
  out->set_ranks_reporting(n.reporting + n.lagging);  // lagging ranks still report
  out->set_ranks_missing(n.missing);
  out->set_last_label(last_label_);
  out->set_paused(paused_);
  out->set_window_steps(options_.engine.window_steps);
  if (const v1::Stall* s = stall_.current()) {
    *out->mutable_stall() = *s;
    if (s->alarm()) out->set_last_label("STALLED");  // a quiet pause keeps the window's label
  }
  out->set_state(JobConditionLocked());
}

absl::Status JobState::Suspects(int32_t window, v1::SuspectsReply* out) const {
  MutexLock lock(&mu_);
  const v1::Stall* stall = stall_.current();
  if (steps_accounted_ == 0 && stall == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("job ", name_, " has no accounted step yet"));
  }
  out->set_job(name_);
  if (steps_accounted_ == 0) {
    StallVerdictLocked(*stall, out->mutable_verdict());
    return absl::OkStatus();
  }
  absl::Status s = SuspectsLocked(window, out);
  // A stalled job never reads HEALTHY: the stall is the verdict, the window stays beside it.
  if (s.ok() && stall != nullptr) StallVerdictLocked(*stall, out->mutable_verdict());
  return s;
}

void JobState::StallVerdictLocked(const v1::Stall& stall, v1::Verdict* v) const {
  v->set_label(stall.ended() ? "RESUMED" : "STALLED");
  v->set_reason(stall.reason());
  v->set_explanation(stall.ended()
                         ? absl::StrCat("the job advanced again after a stall of ",
                                        FormatSeconds(static_cast<double>(stall.stalled_ns())),
                                        " (", stall.text(), ")")
                         : stall.text());
  v->clear_suspects();
  *v->mutable_stall() = stall;
}

absl::Status JobState::SuspectsLocked(int32_t window, v1::SuspectsReply* out) const {
  if (window <= 0) {
    out->set_window(options_.engine.window_steps);
    GroupReport report = engine_->Report().job;
    NameNodeLocked(RankNodesLocked(), &report.verdict);
    ReportToProto(schema_, report, world_size_ - 1, out);
    // The conditions judged at the latest window close (sfctl health explains them).
    for (const DetectorCondition& c : detector_.current()) {
      out->mutable_verdict()->add_unreliable(c.name);
    }
    if (const v1::Verdict& v = out->verdict(); v.steps() > 0) {
      out->mutable_verdict()->set_profiled_steps_left_out(
          ProfiledLeftOutLocked(v.first_step(), v.last_step()));
    }
    return absl::OkStatus();
  }
  // Re-account the last `window` steps held, in a fresh engine whose window is all of them.
  JobConfig config = EngineJobConfigLocked();
  const size_t n = std::min(inputs_.size(), static_cast<size_t>(window));
  config.engine.window_steps = static_cast<int>(std::max<size_t>(n, 1));
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(std::move(config));
  if (!engine.ok()) return engine.status();
  for (size_t i = inputs_.size() - n; i < inputs_.size(); ++i) {
    (void)(*engine)->AddStep(inputs_[i]);
  }
  out->set_window(static_cast<int32_t>(n));
  GroupReport report = (*engine)->Report().job;
  NameNodeLocked(RankNodesLocked(), &report.verdict);
  ReportToProto(schema_, report, world_size_ - 1, out);
  if (const v1::Verdict& v = out->verdict(); v.steps() > 0) {
    out->mutable_verdict()->set_profiled_steps_left_out(
        ProfiledLeftOutLocked(v.first_step(), v.last_step()));
  }
  return absl::OkStatus();
}

void JobState::Steps(int64_t from, int64_t to, int32_t limit, v1::GetStepsReply* out) const {
  for (const Stage& s : schema_.stages()) out->add_stages(s.name);  // const after creation
  StepHistory::Slice slice;
  const StepHistory* history;
  {
    MutexLock lock(&mu_);
    slice = history_.Take(from, to, limit > 0 ? limit : 1000);
    history = &history_;
  }
  // Decodes the summary blocks without holding the job's lock: Fill touches no state of the
  // history but an atomic counter (step_history.h).
  history->Fill(slice, out);
}

std::pair<int64_t, uint64_t> JobState::HistoryFootprint() const {
  MutexLock lock(&mu_);
  return {history_.steps(), history_.bytes()};
}

int64_t JobState::VisitHeldInputs(int64_t from, int64_t to,
                                  absl::FunctionRef<bool(const StepInput&)> visit) const {
  MutexLock lock(&mu_);
  return VisitHeldInputsLocked(from, to, visit);
}

int64_t JobState::VisitHeldInputsLocked(int64_t from, int64_t to,
                                        absl::FunctionRef<bool(const StepInput&)> visit) const {
  auto it = std::lower_bound(inputs_.begin(), inputs_.end(), from,
                             [](const StepInput& s, int64_t v) { return s.step < v; });
  for (; it != inputs_.end() && it->step <= to && visit(*it); ++it) {
  }
  return inputs_.empty() ? -1 : inputs_.front().step;
}

void JobState::JudgeDetectorLocked() {
  std::vector<RankRecordCounters> counters(ranks_.size());
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const RankHealthState& h = ranks_[r];
    counters[r] = {.accepted = h.accepted,
                   .dropped = h.dropped + h.invalid,
                   .clock_backwards = h.clock_backwards,
                   .clock_ahead = h.clock_ahead};
  }
  const std::vector<DetectorCondition>& now = detector_.CloseWindow(counters, steps_accounted_);
  for (size_t i = 0; i < m_.detector_condition.size(); ++i) {
    const bool holds = std::any_of(now.begin(), now.end(), [&](const DetectorCondition& c) {
      return c.name == kDetectorConditions[i];
    });
    m_.detector_condition[i]->Set(holds ? 1 : 0);
  }
}

void JobState::Health(v1::GetHealthReply* out) const {
  MutexLock lock(&mu_);
  const int64_t now = shm::MonotonicNowNs();
  out->set_job(name_);
  for (int32_t r = 0; r < world_size_; ++r) {
    const RankHealthState& h = ranks_[r];
    v1::RankHealth* p = out->add_ranks();
    p->set_rank(r);
    p->set_state(ConditionLocked(r));
    p->set_node(h.node);
    p->set_last_step(aligner_.last_step(r));
    p->set_steps_behind(StepsBehindLocked(r));
    p->set_records_accepted(h.accepted);
    p->set_duplicates(h.duplicates);
    p->set_late(h.late);
    p->set_rejected(h.rejected);
    p->set_dropped_by_writer(h.dropped);
    p->set_torn(h.torn);
    p->set_invalid(h.invalid);
    p->set_owner(h.owner);
    p->set_last_error(h.refused.empty() ? h.last_error : absl::StrCat("refused: ", h.refused));
    p->set_probe_backend(h.probe_backend);
    p->set_probe_intervals(h.probe_intervals);
    p->set_probe_dropped(h.probe_dropped);
    p->set_layout_source(h.layout_source);
    stall_.FillRank(r, now, p);
  }
  if (const v1::Stall* s = stall_.current()) *out->mutable_stall() = *s;
  const RankCounts n = CountRanksLocked();
  out->set_reporting(n.reporting);
  out->set_lagging(n.lagging);
  out->set_missing(n.missing);
  out->set_finished(n.finished);
  out->set_state(JobConditionLocked());
  for (const DetectorCondition& c : detector_.current()) {
    v1::DetectorCondition* d = out->add_detector_conditions();
    d->set_name(c.name);
    d->set_detail(c.detail);
  }
  for (size_t g = 0; g < layout_groups_.groups.size(); ++g) {
    v1::SyncGroup* sg = out->add_sync_groups();
    sg->set_name(layout_groups_.names[g]);
    sg->mutable_ranks()->Add(layout_groups_.groups[g].begin(), layout_groups_.groups[g].end());
  }
  const ProbeBracketing& b = engine_->bracketing();
  out->set_probe_collectives(b.checked());
  out->set_probe_violations(b.violations());
  out->set_probe_rules(probe_rules_note_.empty()
                           ? b.DescribeRules()
                           : absl::StrCat(b.DescribeRules(), " (", probe_rules_note_, ")"));
  for (const BracketFinding& f : b.Findings()) {
    v1::ProbeFinding* pf = out->add_probe_findings();
    pf->set_stage(schema_.stage(f.stage).name);
    pf->set_rank(f.rank);
    pf->set_collectives_checked(f.checked);
    pf->set_violations(f.violations);
    pf->set_max_overrun_ns(f.max_overrun_ns);
    pf->set_last_violation_step(f.last_violation_step);
    pf->set_explanation(f.explanation);
  }
}

std::vector<v1::VerdictEvent> JobState::VerdictsAfter(int64_t after_seq, size_t max_count) const {
  MutexLock lock(&mu_);
  // Sequence numbers ascend: many watchers each asking for the few newest stay cheap.
  auto it =
      std::upper_bound(verdicts_.begin(), verdicts_.end(), after_seq,
                       [](int64_t seq, const v1::VerdictEvent& ev) { return seq < ev.seq(); });
  std::vector<v1::VerdictEvent> out;
  for (; it != verdicts_.end() && out.size() < max_count; ++it) out.push_back(*it);
  return out;
}

absl::Status JobState::ApplyConfig(const v1::ConfigChange& change) {
  MutexLock lock(&mu_);
  if (change.stall_after_ms() != 0 && change.stall_after_ms() != -1 &&
      (change.stall_after_ms() < 1000 || change.stall_after_ms() > 86'400'000)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stall_after_ms ", change.stall_after_ms(),
                     ": a stall limit is 1000 ms to a day (86400000), or -1 for the default"));
  }
  if (StallLimitOnly(change)) {
    v1::JournalRecord rec;
    rec.mutable_config()->set_stall_after_ms(change.stall_after_ms());
    journal_->Append(rec);
    stall_.set_fixed_ns(StallFixedNs(change.stall_after_ms()));
    return absl::OkStatus();
  }
  const EngineConfig merged = Merge(options_.engine, change);
  if (absl::Status s = merged.Validate(); !s.ok()) return s;
  // A longer window holds more memory: it must fit the job's limit and the budget.
  const int64_t bytes = EstimateJobBytes(ShapeLocked(merged.window_steps));
  if (merged.window_steps > options_.engine.window_steps) {
    if (bytes > options_.limits.max_job_memory_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("job ", name_, ": a window of ", merged.window_steps, " steps needs about ",
                       bytes >> 20, " MB; one job may use at most ",
                       options_.limits.max_job_memory_bytes >> 20, " MB (--max-job-memory-mb)"));
    }
  }
  if (absl::Status s = memory_.Resize(bytes, absl::StrCat("job ", name_)); !s.ok()) return s;
  v1::JournalRecord rec;
  v1::ConfigChanged* c = rec.mutable_config();
  c->set_window_steps(change.window_steps());
  c->set_excess_z(change.excess_z());
  c->set_clear_share(change.clear_share());
  c->set_tie_z(change.tie_z());
  c->set_noise_floor_ns(change.noise_floor_ns());
  c->set_stall_after_ms(change.stall_after_ms());
  journal_->Append(rec);
  if (change.stall_after_ms() != 0) stall_.set_fixed_ns(StallFixedNs(change.stall_after_ms()));
  options_.engine = merged;
  return RebuildEngineLocked();
}

void JobState::SetPaused(bool paused) {
  MutexLock lock(&mu_);
  paused_ = paused;
  v1::JournalRecord rec;
  rec.mutable_pause()->set_paused(paused);
  journal_->Append(rec);
}

void JobState::SetSampleEvery(uint32_t every) {
  MutexLock lock(&mu_);
  sample_every_ = every;
}

v1::ControlRequest JobState::JobControl() const {
  MutexLock lock(&mu_);
  return JobControlLocked();
}

v1::ControlRequest JobState::JobControlLocked() const {
  v1::ControlRequest req;
  req.set_job(id_);  // the id the stubs know
  req.set_rank(-1);
  req.set_paused(paused_);
  req.set_sample_every(sample_every_);
  req.set_trace_first_step(0);
  req.set_trace_last_step(-1);
  return req;
}

}  // namespace stagefrontier
