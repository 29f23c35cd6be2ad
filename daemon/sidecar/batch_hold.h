// When the sidecar sends what it drained: its batching without a flag (issue 33; docs/results.md
// "Coordinator ingest through gRPC"). The coordinator's cost is per message, so a node sends
// several steps per message: up to `records_per_message` records, i.e. K steps of its ranks
// (K a power of two <= max_steps_per_message, so that K divides the default 100-step window).
//
// Batches end on step numbers, not on a timer: a job's records go out when every rank of the job
// on this node has finished a step s with (s + 1) % K == 0. Every node of a job then sends step s
// at about the moment its own ranks finish it, as without batching (the coordinator's step
// deadline counts from a step's first record), and a window of 100 steps that starts at step 0
// closes with no added wait: its last step ends a batch. The hold is also bounded in time —
// (K + 1) of the job's step times, measured from when each rank's steps were drained, and never
// more than max_hold_ns — for ranks that stop, skip steps or start mid-batch.
//
// No clock, no I/O: callers pass `now_ns`; the streamer adds the events that send at once
// (a full batch, SIGTERM, an open stage that passed its report threshold).
//
//   BatchHold hold;
//   for (const v1::RankSteps& rs : drained) hold.Note(rs.job(), rs.rank(), last_step, now);
//   if (hold.Due(now, oldest_pending_ns)) { send(); hold.Sent(); }
#ifndef STAGEFRONTIER_DAEMON_SIDECAR_BATCH_HOLD_H_
#define STAGEFRONTIER_DAEMON_SIDECAR_BATCH_HOLD_H_

#include <cstdint>
#include <map>
#include <string>

namespace stagefrontier {

struct BatchHoldOptions {
  // Records per message the hold aims at: 32 is 4 steps of an 8-GPU node, the shape that held a
  // 100,000-GPU job at 1 step/s (docs/results.md).
  int64_t records_per_message = 32;
  // At most this many steps per message (a power of two that divides 100).
  int64_t max_steps_per_message = 4;
  // Never hold longer: below the coordinator's 5 s step deadline and stall floor, above the 3 s
  // that 4 steps of a 1 step/s job span.
  int64_t max_hold_ns = 4'000'000'000;
  // A rank whose steps stopped coming for this long no longer holds its job's batches back (a
  // hung, finished or departed rank), and is forgotten after forget_after_ns.
  int64_t rank_idle_ns = 3'000'000'000;
  int64_t forget_after_ns = 60'000'000'000;
};

class BatchHold {
 public:
  explicit BatchHold(BatchHoldOptions options = {}) : options_(options) {}

  // Rank `rank` of `job` had its steps up to `last_step` drained at `now_ns` (into the pending
  // batch).
  void Note(const std::string& job, int32_t rank, int64_t last_step, int64_t now_ns);
  // True when the pending batch, whose oldest records were drained at `oldest_ns`, should go
  // now: a job's ranks on this node all finished a batch's last step, or the hold ran out.
  bool Due(int64_t now_ns, int64_t oldest_ns) const;
  // The pending batch went out at `now_ns`.
  void Sent(int64_t now_ns);

  // Steps per message for `job` (K above; 0 for a job not seen). For tests and the harness.
  int64_t StepsPerMessage(const std::string& job) const;
  // How long the pending batch may wait: the shortest hold of the jobs seen.
  int64_t HoldNs() const;

 private:
  struct Rank {
    int64_t last_step = -1;
    int64_t last_advance_ns = 0;
  };
  struct Job {
    std::map<int32_t, Rank> ranks;
    int64_t step_ns = 0;        // the job's step time, as this node drains it (EWMA)
    int64_t sent_through = -1;  // the complete step when the last batch went out
    int64_t complete = -1;      // every active rank of the job on this node finished it
    int64_t steps_per_message = 1;
    bool pending = false;  // has records in the pending batch
  };
  // Recomputes the job's complete step and steps per message.
  void Refresh(Job& job, int64_t now_ns) const;
  bool JobDue(const Job& job) const;

  BatchHoldOptions options_;
  std::map<std::string, Job, std::less<>> jobs_;
  int64_t last_gc_ns_ = 0;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIDECAR_BATCH_HOLD_H_
