// One job on the coordinator: its schema and world size, the step aligner, the accounting
// engine, the journal that makes it survive restarts, what queries read (recent step
// summaries, verdicts, per-rank health) and its runtime control state. Thread-safe: every
// method takes the job's lock.
//
//   auto job = JobState::Create(declaration, options, &metrics);     // a new job
//   auto job = JobState::Restore(journal_path, options, &metrics);   // after a restart
//   IngestCounts c = (*job)->Ingest(rank_steps, "node-a", now_ns);   // from a sidecar batch
//   (*job)->CloseDue(now_ns);  (*job)->Flush();                      // account, make durable
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_JOB_STATE_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_JOB_STATE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "daemon/accounting/engine.h"
#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/coordinator/detector_health.h"
#include "daemon/coordinator/job_journal.h"
#include "daemon/coordinator/job_layout.h"
#include "daemon/coordinator/journal_compactor.h"
#include "daemon/coordinator/resource_limits.h"
#include "daemon/coordinator/stall_watch.h"
#include "daemon/coordinator/step_aligner.h"
#include "daemon/coordinator/step_history.h"
#include "daemon/events/closed_window.h"
#include "daemon/events/verdict_observer.h"
#include "stagefrontier/v1/ingest.pb.h"
#include "stagefrontier/v1/journal.pb.h"
#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

struct JobOptions {
  std::string data_dir;  // journals live in <data_dir>/<job>.journal
  bool fsync = true;
  AlignerOptions aligner;
  EngineConfig engine;
  int64_t history_steps = 10'000;          // step summaries kept for GetSteps
  int64_t history_rank_steps = 1'000'000;  // raw inputs kept for re-accounting a window
  int64_t lagging_steps = 20;              // a rank this far behind the newest step lags
  // Which stages may contain which collectives (daemon/accounting/probe_bracketing.h); a job
  // whose schema lacks a stage they name falls back to the default (sync and mixed stages).
  std::string probe_bracket_rules;
  size_t verdicts_kept = 1000;
  ResourceLimits limits;
  // Where jobs reserve their estimated memory (resource_limits.h); null: not accounted.
  MemoryBudget* budget = nullptr;
  // Told of every closed window, in this order (daemon/events/verdict_observer.h): the node
  // ledger, then the capture trigger, in the coordinator. JobRegistry appends its verdict bell.
  // Not owned; each must outlive the jobs.
  std::vector<VerdictObserver*> observers;
  // When no progress is a stall (stall_watch.h; --stall-after-ms, --stall-pause-alarm-ms).
  StallOptions stall;
};

struct IngestCounts {
  uint32_t accepted = 0;
  uint32_t duplicates = 0;
  uint32_t late = 0;
  uint32_t far_ahead = 0;        // refused: implausibly far ahead of the job (a corrupt step)
  int64_t far_ahead_step = -1;   // the first of them
  int64_t job_step = -1;         // where the job was then
  uint32_t selftest_marked = 0;  // accepted records marked kRecordSelfTestDelay (self-tests)
  // Nothing was kept: a rank whose process changed (NoteOwner) sent step `new_run_step`, at or
  // before the `previous_step` its former process reached. A re-run: JobRegistry starts the
  // job's next generation and the records go there.
  bool new_run = false;
  int64_t new_run_step = -1;
  int64_t previous_step = -1;
};

// A change of the job's stall limit only: the engine and its windows stay as they are.
bool StallLimitOnly(const v1::ConfigChange& change);

// "<data_dir>/<job>.journal" (`job` a job name: "run42", or "run42@2" for a later generation).
// Job ids are restricted (shm::ValidJobId) so this is a plain name.
std::string JournalPath(const std::string& data_dir, const std::string& job);

// The name queries use for generation `generation` of job id `id`: the id itself for the first,
// "<id>@<generation>" after ('@' is never part of an id, so names never collide).
std::string GenerationName(const std::string& id, uint32_t generation);
// Splits a job name into its id and generation: "run42" -> ("run42", 0: the current one),
// "run42@2" -> ("run42", 2). False for a malformed suffix.
bool ParseJobName(const std::string& name, std::string* id, uint32_t* generation);

class JobState {
 public:
  // Its series leave /metrics (CoordinatorMetrics::DropJob): one JobState of a name lives
  // at a time (JobRegistry).
  ~JobState();

  // A new job declared by its first rank: validates the declaration, reserves its memory and
  // creates its journal atomically (JobJournal::Create). InvalidArgument for a bad job id,
  // world size or schema; ResourceExhausted for a world size or memory estimate over the
  // limits (resource_limits.h); AlreadyExists if a journal is there (restore it instead);
  // Unavailable when the data directory cannot take the journal now (nothing is left behind:
  // the same declaration succeeds later).
  // `generation` > 1: a later run of the job id (JobRegistry::StartGeneration), named and
  // journaled as GenerationName says.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JobState>> Create(
      const v1::RankDeclaration& declaration, const JobOptions& options,
      CoordinatorMetrics* metrics, uint32_t generation = 1);

  // Rebuilds a job from its journal (JobJournal::Open repairs damage, keeping what it
  // skips). Steps still waiting for ranks get a fresh deadline from `now_ns` (monotonic).
  // Records that cannot be applied are skipped and counted (replay_skipped()). DataLoss if
  // the journal's first intact record is not a valid JobDeclared (see Salvage); other
  // errors as JobJournal::Open.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JobState>> Restore(
      const std::string& path, const JobOptions& options, CoordinatorMetrics* metrics,
      JournalOpenInfo* info, int64_t now_ns);

  // A journal whose declaration was lost (Restore said DataLoss), restored once a rank of the
  // job declares itself again: the damaged file is kept aside, a new journal holds
  // `declaration` and every intact record of the old one, and the job is restored from it.
  // Fails as Create's checks, then as JobJournal::Open.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JobState>> Salvage(
      const std::string& path, const v1::RankDeclaration& declaration, const JobOptions& options,
      CoordinatorMetrics* metrics, JournalOpenInfo* info, int64_t now_ns);

  // Checks a new job's declaration (id, world size, schema) against the limits and returns
  // its schema: what Create checks before anything is reserved or written.
  static absl::StatusOr<StageSchema> CheckNewJob(const v1::RankDeclaration& declaration,
                                                 const JobOptions& options);

  // FailedPrecondition naming the difference if a rank's declaration does not match the job
  // (schema, world size); OutOfRange for a rank outside [0, world_size).
  [[nodiscard]] absl::Status CheckDeclaration(const v1::RankDeclaration& declaration) const;
  // The process behind a declared rank: the slot's owner generation on `node`. A rank that had
  // sent steps and now declares from another process is marked restarted: if its next steps
  // go back (at or before its last), Ingest says new_run instead of keeping them. Journaled,
  // so a coordinator restarted in between still tells a re-run.
  void NoteOwner(const v1::RankDeclaration& declaration, const std::string& node);

  // Decodes, journals and aligns one RankSteps. InvalidArgument for malformed packed bytes,
  // OutOfRange for a bad rank; nothing is kept then, nor when it reports new_run. `stream`
  // names the sidecar stream it came by (0: none), whose steps say that sidecar is alive.
  [[nodiscard]] absl::StatusOr<IngestCounts> Ingest(const v1::RankSteps& steps,
                                                    const std::string& node, int64_t now_ns,
                                                    uint64_t stream = 0);
  // Per-slot counters a sidecar reported for one of this job's ranks, by `stream` (0: none).
  void UpdateStubHealth(const v1::SlotHealth& health, const std::string& node, uint64_t stream = 0);
  // Sidecar stream `stream` ended: the rank is lost to the stall watch at once if that stream
  // was the last to report it (a killed sidecar is not silent for seconds first).
  void SidecarStreamEnded(int32_t rank, uint64_t stream);

  // Decides whether the job is stalled at `now_ns` (monotonic), without waiting for a window
  // (stall_watch.h): a stall that begins, changes or ends is journaled, kept with the verdicts
  // (label STALLED, then RESUMED) and told to the observers at once; the gauge follows.
  void CheckStall(int64_t now_ns);

  // Closes and accounts every step that is due at `now_ns`. Returns how many.
  int CloseDue(int64_t now_ns);
  // Makes everything journaled before the call durable. Fails with the journal's error. Does
  // not take the job's lock: ingest and queries go on during an fsync.
  [[nodiscard]] absl::Status Flush();
  // Moves the journal's plain records into record blocks when enough have been written
  // (journal_compactor.h); appending and acknowledging go on meanwhile. Does not take the
  // job's lock. Fails as CompactLiveJournal, the journal then unchanged.
  [[nodiscard]] absl::StatusOr<JournalCompaction> CompactJournal(
      const JournalCompactorOptions& options);
  // Journal position after everything ingested so far; durable once DurableUpTo(it).
  uint64_t JournalPosition() const { return journal_->appended_bytes(); }
  bool DurableUpTo(uint64_t position) const { return journal_->durable_bytes() >= position; }

  // Queries. FailedPrecondition from Suspects before the first accounted step.
  void Info(v1::JobInfo* out) const;
  [[nodiscard]] absl::Status Suspects(int32_t window, v1::SuspectsReply* out) const;
  void Steps(int64_t from, int64_t to, int32_t limit, v1::GetStepsReply* out) const;
  // The step summaries held for Steps, and the bytes they take (summary blocks + open steps).
  std::pair<int64_t, uint64_t> HistoryFootprint() const;
  // Passes the raw inputs held for re-accounting (each rank's boundaries, its step starting at
  // 0) of the steps in [from, to] to `visit`, oldest first, until it returns false. Runs under
  // the job's lock: `visit` must not call into the job. Returns the oldest step held (-1: none).
  int64_t VisitHeldInputs(int64_t from, int64_t to,
                          absl::FunctionRef<bool(const StepInput&)> visit) const;
  // A rank of this job whose declaration was refused (its stages or world size are not the
  // job's): health shows it "refused" with `why`, and counts its `records` as rejected.
  void NoteRefused(int32_t rank, const std::string& node, absl::string_view why, uint64_t records);
  void Health(v1::GetHealthReply* out) const;
  // The verdicts held with seq > after_seq, oldest first, at most `max_count`. New ones are
  // announced to JobOptions::observers (OnVerdictsAppended).
  std::vector<v1::VerdictEvent> VerdictsAfter(int64_t after_seq, size_t max_count = SIZE_MAX) const;

  // Runtime control. ApplyConfig: InvalidArgument for values the engine refuses.
  [[nodiscard]] absl::Status ApplyConfig(const v1::ConfigChange& change);
  void SetPaused(bool paused);
  void SetSampleEvery(uint32_t every);
  // What every stub of the job should currently be told (paused, sampling).
  v1::ControlRequest JobControl() const;

  // The newest step any rank reported (-1 before any).
  int64_t NewestStep() const;
  // The job's name in queries (GenerationName), the id its ranks declared, its generation.
  const std::string& name() const { return name_; }
  const std::string& id() const { return id_; }
  uint32_t generation() const { return generation_; }
  // When this job last showed life (monotonic ns): records ingested, or a slot's health
  // whose owner is alive; its creation or restore before that. JobRegistry retires jobs idle
  // for --job-retire-idle-ms when it needs room, and streams forget them.
  int64_t last_active_ns() const { return last_active_ns_.load(std::memory_order_relaxed); }
  bool IdleFor(int64_t now_ns, int64_t idle_ns) const {
    return now_ns - last_active_ns() >= idle_ns;
  }
  // A restored job was last active when its journal was last written, not at its restore.
  void set_last_active_ns(int64_t ns) { last_active_ns_.store(ns, std::memory_order_relaxed); }
  // A later generation of the job id exists: this run is kept for reading only.
  void MarkSuperseded() { superseded_.store(true, std::memory_order_relaxed); }
  bool superseded() const { return superseded_.load(std::memory_order_relaxed); }
  const StageSchema& schema() const { return schema_; }
  int32_t world_size() const { return world_size_; }
  // Journal records a restore could not apply (skipped, not fatal).
  int64_t replay_skipped() const {
    MutexLock lock(&mu_);
    return replay_skipped_;
  }
  // The memory this job reserved (its estimate).
  int64_t reserved_bytes() const {
    MutexLock lock(&mu_);
    return memory_.bytes();
  }

 private:
  struct RankHealthState {
    std::string node;
    uint64_t accepted = 0, duplicates = 0, late = 0, rejected = 0;
    uint64_t dropped = 0, torn = 0, invalid = 0;
    uint64_t clock_backwards = 0, clock_ahead = 0;
    std::string probe_backend;
    uint64_t probe_intervals = 0, probe_dropped = 0;
    const char* layout_source = "";  // shm::v1::LayoutSourceName's, from the latest health
    std::string owner;
    uint64_t pending = 0;  // records the sidecar has not read from the slot yet
    std::string last_error;
    std::string refused;      // why this rank's declaration was refused (NoteRefused)
    int8_t can_capture = -1;  // from the stub's health: 1 a capture handler, 0 none, -1 unknown
    std::string process;      // NoteOwner: "<node>#<owner generation>", "" before any
    bool restarted = false;   // declared from another process since its last steps
  };

  // How each rank's process ended, by its latest slot health (UpdateStubHealth, the only
  // writer). Kept apart from RankHealthState (~350 bytes a rank) in 4 bytes: the stall check
  // and the rank counts read it for every rank several times a second, and at 100,000 ranks a
  // walk over RankHealthState missed the cache at every rank.
  struct RankExit {
    bool released = false;  // owner "none", not raised, nothing pending: said all it will say
    bool dead = false;      // owner "dead": the process is gone
    // exit_reason "exception" or "collective_exception": its trainer ended on an uncaught
    // exception (gone mid-step, not finished; any other value the slot's bytes may say is not
    // taken); ..._in_collective: one a collective raised (a peer gone).
    bool raised = false;
    bool raised_in_collective = false;
  };

  JobState(std::string id, uint32_t generation, int32_t world_size, StageSchema schema,
           const JobOptions& options, CoordinatorMetrics* metrics);
  // Applies a RankOwned record (live and in replay); false if it changed nothing.
  bool OwnerLocked(const v1::RankOwned& owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rebuilds the engine with the sync groups of the ranks' layouts (job_layout.h) when every
  // rank has declared and the groups changed; a refused layout falls back to one group and a
  // detector-health condition. Run at the same journal position live and in replay.
  void ApplyLayoutLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteLayoutLocked(int32_t rank, const DeclaredLayout& layout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The memory model's shape of this job with `window_steps`.
  JobShape ShapeLocked(int64_t window_steps) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reserves this job's memory (Create: refused over the limits; restore: reserved anyway).
  absl::Status ReserveMemory(bool restoring) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Apply(const v1::JournalRecord& record, int64_t now_ns, bool replaying)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<IngestCounts> AlignLocked(const v1::RankSteps& steps, const std::string& node,
                                           int64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes `step` and hands what it yields to each consumer, in this order: the engine, the
  // history and raw inputs kept for queries, the metrics, then the verdicts (VerdictsLocked).
  void AccountLocked(int64_t step, int64_t now_ns, bool replaying)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A step closed while a profiler captured it: counted, left out of the evidence.
  void CountCapturedLocked(int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps the step's summary (history), its detector input and its raw input (for Suspects).
  void KeepStepLocked(const StepAccounting& acc, StepInput input)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Step metrics; `delay_ns` < 0 when the verdict delay is not observed (replay).
  void CountStepLocked(const StepAccounting& acc, int64_t delay_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountProbeBracketsLocked(size_t stages) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the engine's closed verdicts: kept for queries, counted, told to the observers.
  void VerdictsLocked(bool replaying) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::VerdictEvent VerdictEventLocked(const Verdict& v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountVerdictLocked(const Verdict& v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A stall event with the verdicts (seq, watchers); observers told unless replaying.
  void AppendStallEventLocked(const v1::Stall& stall, bool replaying)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The verdict's words for a stall (label STALLED or RESUMED, reason, explanation).
  void StallVerdictLocked(const v1::Stall& stall, v1::Verdict* v) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SuspectsLocked(int32_t window, v1::SuspectsReply* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The event the observers get for a closed "job" window (`ev` is its proto, conditions in).
  ClosedJobWindow ClosedWindowLocked(const Verdict& v, const v1::VerdictEvent& ev) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RebuildEngineLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The engine's job config for this job (schema, world size, engine config, probe rules).
  JobConfig EngineJobConfigLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decodes and checks rs.collectives() into probe spans per step of `steps`.
  absl::Status DecodeCollectivesLocked(const v1::RankSteps& rs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct RankCounts {
    int reporting = 0, lagging = 0, missing = 0, finished = 0;
  };
  // Steps between the newest step seen from any rank and `rank`'s newest (0 before any).
  int64_t StepsBehindLocked(int32_t rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "unseen", "refused", "finished", "missing", "lagging" or "reporting": the one
  // classification of a rank.
  const char* ConditionLocked(int32_t rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ConditionLocked(rank) == "finished", without the rest of the classification (asked for
  // every rank at each stall check, four times a second).
  bool FinishedLocked(int32_t rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  RankCounts CountRanksLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every rank finished: "finished", else "running".
  const char* JobConditionLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether every rank's stub exited cleanly (ConditionLocked "finished"). Asked at each slot's
  // health: it starts at the rank last found unfinished and stops at the first still so, and
  // remembers a yes until a health says otherwise (UpdateStubHealth) — amortised O(1), not a
  // walk over the world per health (10^10 condition checks a second at 100,000 ranks).
  bool AllRanksFinishedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Profiled steps left out of the evidence within [first, last] (a window's span).
  int32_t ProfiledLeftOutLocked(int64_t first, int64_t last) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Judges detector health for the window that just closed; sets the condition gauges.
  void JudgeDetectorLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateRankGaugesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The node serving each rank ("" while unknown), for the observers.
  std::vector<std::string> RankNodesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t VisitHeldInputsLocked(int64_t from, int64_t to,
                                absl::FunctionRef<bool(const StepInput&)> visit) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The verdict pipeline's node steps on a job-wide verdict (daemon/nodes): a tie or cells
  // covering one node's ranks (NameWholeNode), else a node slower than its peers on other
  // nodes over the window's held raw steps (NameSlowNode).
  void NameNodeLocked(const std::vector<std::string>& rank_nodes, Verdict* v) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::ControlRequest JobControlLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string id_;
  const uint32_t generation_;
  const std::string name_;
  std::atomic<bool> superseded_{false};
  std::atomic<int64_t> last_active_ns_;
  const int32_t world_size_;
  const StageSchema schema_;
  JobOptions options_;
  CoordinatorMetrics* metrics_;
  JobMetrics m_;

  mutable Mutex mu_;
  // Set once before the job is shared (Create, Restore, Salvage); thread-safe itself, so
  // Flush, JournalPosition and compaction use it without the job's lock.
  std::unique_ptr<JobJournal> journal_;
  std::unique_ptr<Engine> engine_ ABSL_GUARDED_BY(mu_);
  StepAligner aligner_ ABSL_GUARDED_BY(mu_);
  // AlignLocked's decode buffers, kept to avoid allocating per message; decoded_probe_ by index
  // into decoded_steps_.
  std::vector<int64_t> decoded_steps_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> decoded_durations_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> decoded_flags_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<ProbeSpan>> decoded_probe_ ABSL_GUARDED_BY(mu_);
  std::string probe_rules_ ABSL_GUARDED_BY(mu_);  // the rules in effect for this job
  // Per stage: bracketed, violations already in metrics.
  std::vector<uint64_t> probe_counted_ ABSL_GUARDED_BY(mu_);
  // Why the configured rules were not used, if so.
  std::string probe_rules_note_ ABSL_GUARDED_BY(mu_);
  int64_t steps_accounted_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t partial_steps_ ABSL_GUARDED_BY(mu_) = 0;
  // Closed but left out of the evidence (profiler captures).
  int64_t captured_steps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_step_ ABSL_GUARDED_BY(mu_) = -1;
  // Per-step summaries for GetSteps, older ones in summary blocks.
  StepHistory history_ ABSL_GUARDED_BY(mu_);
  std::deque<StepInput> inputs_ ABSL_GUARDED_BY(mu_);  // recent raw steps, for Suspects(window > 0)
  int64_t inputs_rank_steps_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<v1::VerdictEvent> verdicts_ ABSL_GUARDED_BY(mu_);
  int64_t verdict_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_label_ ABSL_GUARDED_BY(mu_);
  std::vector<RankHealthState> ranks_ ABSL_GUARDED_BY(mu_);
  std::vector<RankExit> exits_ ABSL_GUARDED_BY(mu_);  // by rank
  // The observers were told the job finished (OnJobFinished); reset when a rank comes back.
  bool finished_told_ ABSL_GUARDED_BY(mu_) = false;
  mutable int32_t unfinished_hint_ ABSL_GUARDED_BY(mu_) = 0;
  mutable bool all_finished_ ABSL_GUARDED_BY(mu_) = false;
  // The latest profiled steps (CountCapturedLocked), ascending, for the windows' spans.
  std::deque<int64_t> profiled_steps_ ABSL_GUARDED_BY(mu_);
  int64_t gauges_updated_ns_ ABSL_GUARDED_BY(mu_) = -1;  // when the rank gauges were last counted
  // Judged at every window close; its conditions mark the verdicts.
  DetectorHealth detector_ ABSL_GUARDED_BY(mu_);
  // By rank: the layout its current process declared (kUnknown before any).
  std::vector<DeclaredLayout> layouts_ ABSL_GUARDED_BY(mu_);
  int32_t layouts_unknown_ ABSL_GUARDED_BY(mu_);        // ranks still to declare
  int32_t layout_reference_ ABSL_GUARDED_BY(mu_) = -1;  // the first rank that declared
  LayoutGroups layout_groups_ ABSL_GUARDED_BY(mu_);     // in the engine; empty: one group
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t sample_every_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t replay_skipped_ ABSL_GUARDED_BY(mu_) = 0;
  MemoryBudget::Reservation memory_ ABSL_GUARDED_BY(mu_);
  StallWatch stall_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_JOB_STATE_H_
