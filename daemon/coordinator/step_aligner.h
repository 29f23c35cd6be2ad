// Aligns one job's rank-steps across ranks: holds each step until every expected rank has
// reported it (or its deadline passes), then hands it over, oldest first, as the engine's
// StepInput. Ranks whose records stop coming are marked missing after the first step that
// closed without them, and later steps no longer wait for them; a record from a missing rank
// brings it back. Duplicates (a re-send after a restart) and records for steps already
// closed are recognized and counted, never accounted twice. No I/O, no threads, no clock:
// callers pass `now_ns`, so that a journal replay makes exactly the same decisions.
//
// One corrupt step number cannot ruin a rank's stream: a record far ahead of where the job is
// (more than max_step_lead beyond the median of the ranks' newest steps) is refused, a step a
// rank has not reported yet is accepted even after a later one of that rank (resynchronizing
// after a bogus jump), and a step that stays open far ahead of the job while the job goes on
// is dropped as orphaned.
//
//   StepAligner aligner(/*world_size=*/16, /*stage_count=*/5, {.deadline_ns = 5'000'000'000});
//   aligner.Add(rank, step, durations, flags, now_ns);
//   while (auto step = aligner.NextClosable(now_ns)) engine->AddStep(aligner.Close(*step));
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_STEP_ALIGNER_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_STEP_ALIGNER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "daemon/accounting/step_input.h"

namespace stagefrontier {

struct AlignerOptions {
  // A step closes as partial once this long has passed since its first record arrived, and
  // none came for the last fifth of it (StepAligner::kQuietFraction): a step whose records
  // still come in is not cut off in the middle of them (nodes that batch on different steps
  // send one step over several seconds, and a coordinator behind on its streams takes them in
  // later still). Never later than twice this after its first record.
  int64_t deadline_ns = 5'000'000'000;
  // At most this many steps wait; the oldest is closed when one more arrives. Within one
  // message nothing closes, so a record that would open a step past twice that (and 64 more)
  // is refused as far ahead: a hostile rank's 100,000 new steps in one batch would otherwise
  // hold 100,000 world-sized bitmaps at once.
  int64_t max_pending_steps = 1024;
  // A record more than this many steps beyond where the job is (the median of the ranks'
  // newest steps) is refused as implausible. When every rank jumps (a restart with other step
  // numbers), the median follows after the first records.
  int64_t max_step_lead = 100'000;
};

enum class AlignOutcome { kAccepted, kDuplicate, kLate, kFarAhead };

enum class RankState : uint8_t { kUnseen, kReporting, kMissing };

class StepAligner {
 public:
  StepAligner(int32_t world_size, uint32_t stage_count, AlignerOptions options = {});

  // Offers one rank-step (rank in [0, world_size), stage_count durations, checked by the
  // caller). Returns kDuplicate if this (rank, step) is already held or was accounted, kLate
  // if its step closed without it, kFarAhead (not kept) if it lies more than max_step_lead
  // beyond where the job is.
  // `probe` holds the rank's probe spans for this step, times relative to the step's start
  // (they follow the step into Close; their `stage` is set there from the boundaries).
  AlignOutcome Add(int32_t rank, int64_t step, const int64_t* durations_ns, uint32_t flags,
                   int64_t now_ns, std::vector<ProbeSpan> probe = {});

  // The oldest pending step if it can close now: every expected rank reported it, its
  // deadline passed with none of its records coming in lately (AlignerOptions::deadline_ns),
  // or too many steps wait. nullopt otherwise.
  std::optional<int64_t> NextClosable(int64_t now_ns) const;
  // A step past its deadline waits while its records came within deadline / kQuietFraction.
  static constexpr int64_t kQuietFraction = 5;
  // Pending steps that are orphans: their first record arrived more than a deadline before the
  // first record of an older pending step, so they lie ahead of the job's own numbering (a
  // corrupt step number). Oldest first.
  std::vector<int64_t> Orphans() const;
  // Forgets pending step `step` and its records (an orphan). Returns the rank-steps dropped.
  int64_t Drop(int64_t step);
  // Removes step `step` (must be the oldest pending) and returns its input, ranks in arrival
  // order, boundaries rebuilt from durations with the step starting at 0, each probe span
  // placed in the stage where the rank called its collective, `captured` when a record was
  // flagged as inside a profiler capture. Ranks absent from it become missing.
  StepInput Close(int64_t step);
  // Hands back an input Close returned, once its owner is done with it: the next Close fills it
  // again, its vectors' capacity kept (at 100,000 ranks a step's input is 100,000 vectors in a
  // 5.6 MB one, allocated and page-faulted anew for every step otherwise). At most
  // kSpareInputs are kept; more are freed.
  void Recycle(StepInput input);

  RankState rank_state(int32_t rank) const { return state_[rank]; }
  // The newest step accepted from `rank`, -1 if none.
  int64_t last_step(int32_t rank) const { return last_accepted_[rank]; }
  // The newest step accepted from any rank, -1 if none.
  int64_t newest_step() const { return newest_; }
  int64_t last_closed() const { return last_closed_; }
  size_t pending_steps() const { return pending_.size(); }
  // How many times the median of the ranks' claims was computed (tests: a bound on the cost).
  int64_t reference_computations() const { return reference_computations_; }
  // Restarts every pending step's deadline at `now_ns` (after a journal replay, whose
  // arrival times mean nothing on this run's clock).
  void RestartDeadlines(int64_t now_ns) {
    for (auto& [step, p] : pending_) p.first_arrival_ns = p.last_arrival_ns = now_ns;
  }
  // When the oldest pending step's first record arrived; 0 if none waits.
  int64_t oldest_first_arrival_ns() const {
    return pending_.empty() ? 0 : pending_.begin()->second.first_arrival_ns;
  }
  int32_t missing_count() const { return missing_; }

 private:
  struct Pending {
    int64_t first_arrival_ns = 0;
    int64_t last_arrival_ns = 0;  // of its newest accepted record
    int32_t present = 0;
    std::vector<uint64_t> has;                  // bit per rank (memory: world/8 per step)
    std::vector<int32_t> ranks;                 // arrival order
    std::vector<int64_t> durations;             // rank-major, arrival order
    std::vector<std::vector<ProbeSpan>> probe;  // arrival order
    bool captured = false;                      // a record carried kRecordTraceCaptured
  };
  bool Complete(const Pending& p) const;
  static bool Has(const Pending& p, int32_t rank) { return (p.has[rank >> 6] >> (rank & 63)) & 1; }
  // Where the job is: the median of the ranks' newest claimed steps (records refused as far
  // ahead count as claims, so that a job-wide jump is followed), at least the last closed.
  int64_t Reference();
  // Reference(), computed again only when it may have moved: a claim that was at or below it
  // changed, or a step closed. A rank's claim already above the median moving further up
  // cannot move it, so a run of far-ahead records costs one median, not one each (a world of
  // 131,072 ranks made each a full copy and nth_element, under the job's lock).
  int64_t CachedReference();
  void RaiseClaim(int32_t rank, int64_t step);
  void RecomputeNewest(int32_t rank);

  int32_t world_size_;
  uint32_t stage_count_;
  AlignerOptions options_;
  std::map<int64_t, Pending> pending_;
  // The buffers of closed steps, emptied, for the next steps that open: at 100,000 ranks a
  // step's buffers are megabytes, and growing fresh ones for every step re-copied and
  // page-faulted them under the job's lock. A sidecar's batch opens and closes up to 8 steps
  // at once (daemon/sidecar/batch_hold.h), so up to kSpareSteps are kept (memory: that many
  // steps' buffers more than pending_, reached anyway while a batch's steps are open).
  static constexpr size_t kSpareSteps = 8;
  std::vector<Pending> spares_;
  // Inputs handed back by Recycle, for Close to fill (memory: two steps' inputs beyond the
  // owner's raw history; EstimateJobBytes counts them).
  static constexpr size_t kSpareInputs = 2;
  std::vector<StepInput> spare_inputs_;
  std::vector<RankState> state_;
  std::vector<int64_t> last_accepted_;
  std::vector<int64_t> claimed_;  // newest step each rank sent, kept or not
  int32_t missing_ = 0;
  int64_t last_closed_ = -1;
  int64_t newest_ = -1;
  int64_t reference_ = -1;
  bool reference_valid_ = false;
  int64_t reference_computations_ = 0;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_STEP_ALIGNER_H_
