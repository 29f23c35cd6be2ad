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

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/accounting/engine.h"
#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/coordinator/detector_health.h"
#include "daemon/coordinator/job_journal.h"
#include "daemon/coordinator/journal_compactor.h"
#include "daemon/coordinator/resource_limits.h"
#include "daemon/coordinator/step_aligner.h"
#include "daemon/coordinator/step_history.h"
#include "daemon/coordinator/verdict_bell.h"
#include "daemon/coordinator/verdict_observer.h"
#include "daemon/nodes/node_ledger.h"
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
  // Where closed "job" windows are charged to nodes (daemon/nodes/node_ledger.h); null: not.
  NodeLedger* node_ledger = nullptr;
  // Told of every closed "job" window but replayed ones (verdict_observer.h); null: nobody.
  VerdictObserver* verdict_observer = nullptr;
  // Rung after verdicts were appended, replayed ones included (verdict_bell.h); null: none.
  // JobRegistry supplies its own when this is null.
  VerdictBell* verdict_bell = nullptr;
};

struct IngestCounts {
  uint32_t accepted = 0;
  uint32_t duplicates = 0;
  uint32_t late = 0;
  uint32_t far_ahead = 0;        // refused: implausibly far ahead of the job (a corrupt step)
  int64_t far_ahead_step = -1;   // the first of them
  int64_t job_step = -1;         // where the job was then
  uint32_t selftest_marked = 0;  // accepted records marked kRecordSelfTestDelay (self-tests)
};

// "<data_dir>/<job>.journal". Job ids are restricted (shm::ValidJobId) so this is a plain name.
std::string JournalPath(const std::string& data_dir, const std::string& job);

class JobState {
 public:
  // A new job declared by its first rank: validates the declaration, reserves its memory and
  // creates its journal atomically (JobJournal::Create). InvalidArgument for a bad job id,
  // world size or schema; ResourceExhausted for a world size or memory estimate over the
  // limits (resource_limits.h); AlreadyExists if a journal is there (restore it instead);
  // Unavailable when the data directory cannot take the journal now (nothing is left behind:
  // the same declaration succeeds later).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JobState>> Create(
      const v1::RankDeclaration& declaration, const JobOptions& options,
      CoordinatorMetrics* metrics);

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

  // FailedPrecondition naming the difference if a rank's declaration does not match the job
  // (schema, world size); OutOfRange for a rank outside [0, world_size).
  [[nodiscard]] absl::Status CheckDeclaration(const v1::RankDeclaration& declaration) const;

  // Decodes, journals and aligns one RankSteps. InvalidArgument for malformed packed bytes,
  // OutOfRange for a bad rank; nothing is kept then.
  [[nodiscard]] absl::StatusOr<IngestCounts> Ingest(const v1::RankSteps& steps,
                                                    const std::string& node, int64_t now_ns);
  // Per-slot counters a sidecar reported for one of this job's ranks.
  void UpdateStubHealth(const v1::SlotHealth& health, const std::string& node);

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
  // The verdicts held with seq > after_seq, oldest first, at most `max_count`. New ones ring
  // JobOptions::verdict_bell.
  std::vector<v1::VerdictEvent> VerdictsAfter(int64_t after_seq, size_t max_count = SIZE_MAX) const;

  // Runtime control. ApplyConfig: InvalidArgument for values the engine refuses.
  [[nodiscard]] absl::Status ApplyConfig(const v1::ConfigChange& change);
  void SetPaused(bool paused);
  void SetSampleEvery(uint32_t every);
  // What every stub of the job should currently be told (paused, sampling).
  v1::ControlRequest JobControl() const;

  // The newest step any rank reported (-1 before any).
  int64_t NewestStep() const;
  const std::string& name() const { return name_; }
  const StageSchema& schema() const { return schema_; }
  int32_t world_size() const { return world_size_; }
  // Journal records a restore could not apply (skipped, not fatal).
  int64_t replay_skipped() const { return replay_skipped_; }
  // The memory this job reserved (its estimate).
  int64_t reserved_bytes() const { return memory_.bytes(); }

 private:
  struct RankHealthState {
    std::string node;
    uint64_t accepted = 0, duplicates = 0, late = 0, rejected = 0;
    uint64_t dropped = 0, torn = 0, invalid = 0;
    uint64_t clock_backwards = 0, clock_ahead = 0;
    std::string probe_backend;
    uint64_t probe_intervals = 0, probe_dropped = 0;
    std::string owner;
    std::string last_error;
    std::string refused;      // why this rank's declaration was refused (NoteRefused)
    int8_t can_capture = -1;  // from the stub's health: 1 a capture handler, 0 none, -1 unknown
  };

  JobState(std::string name, int32_t world_size, StageSchema schema, const JobOptions& options,
           CoordinatorMetrics* metrics);
  // Checks a new job's declaration against the limits and returns its schema.
  static absl::StatusOr<StageSchema> CheckNewJob(const v1::RankDeclaration& declaration,
                                                 const JobOptions& options);
  // The memory model's shape of this job with `window_steps`.
  JobShape ShapeLocked(int64_t window_steps) const;
  // Reserves this job's memory (Create: refused over the limits; restore: reserved anyway).
  absl::Status ReserveMemory(bool restoring);
  absl::Status Apply(const v1::JournalRecord& record, int64_t now_ns, bool replaying);
  absl::StatusOr<IngestCounts> AlignLocked(const v1::RankSteps& steps, const std::string& node,
                                           int64_t now_ns);
  void AccountLocked(int64_t step, int64_t now_ns, bool replaying);
  absl::Status RebuildEngineLocked();
  // The engine's job config for this job (schema, world size, engine config, probe rules).
  JobConfig EngineJobConfigLocked() const;
  // Decodes and checks rs.collectives() into probe spans per step of `steps`.
  absl::Status DecodeCollectivesLocked(const v1::RankSteps& rs);
  struct RankCounts {
    int reporting = 0, lagging = 0, missing = 0;
  };
  // Steps between the newest step seen from any rank and `rank`'s newest (0 before any).
  int64_t StepsBehindLocked(int32_t rank) const;
  // "unseen", "missing", "lagging" or "reporting": the one classification of a rank.
  const char* ConditionLocked(int32_t rank) const;
  RankCounts CountRanksLocked() const;
  // Judges detector health for the window that just closed; sets the condition gauges.
  void JudgeDetectorLocked();
  void UpdateRankGaugesLocked() const;
  // The node serving each rank ("" while unknown), for the node ledger.
  std::vector<std::string> RankNodesLocked() const;
  v1::ControlRequest JobControlLocked() const;

  const std::string name_;
  const int32_t world_size_;
  const StageSchema schema_;
  JobOptions options_;
  CoordinatorMetrics* metrics_;
  JobMetrics m_;

  mutable std::mutex mu_;
  std::unique_ptr<JobJournal> journal_;
  std::unique_ptr<Engine> engine_;
  StepAligner aligner_;
  // AlignLocked's decode buffers, kept to avoid allocating per message.
  std::vector<int64_t> decoded_steps_;
  std::vector<int64_t> decoded_durations_;
  std::vector<uint32_t> decoded_flags_;
  std::vector<std::vector<ProbeSpan>> decoded_probe_;  // by index into decoded_steps_
  std::string probe_rules_;                            // the rules in effect for this job
  std::vector<uint64_t> probe_counted_;  // per stage: bracketed, violations already in metrics
  std::string probe_rules_note_;         // why the configured rules were not used, if so
  int64_t steps_accounted_ = 0;
  int64_t partial_steps_ = 0;
  int64_t captured_steps_ = 0;  // closed but left out of the evidence (profiler captures)
  int64_t last_step_ = -1;
  StepHistory history_;           // per-step summaries for GetSteps, older ones in summary blocks
  std::deque<StepInput> inputs_;  // recent raw steps, for Suspects(window > 0)
  int64_t inputs_rank_steps_ = 0;
  std::deque<v1::VerdictEvent> verdicts_;
  int64_t verdict_seq_ = 0;
  std::string last_label_;
  std::vector<RankHealthState> ranks_;
  int64_t gauges_updated_ns_ = -1;  // when the rank gauges were last counted
  DetectorHealth detector_;         // judged at every window close; conditions mark the verdicts
  bool paused_ = false;
  uint32_t sample_every_ = 1;
  int64_t replay_skipped_ = 0;
  MemoryBudget::Reservation memory_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_JOB_STATE_H_
