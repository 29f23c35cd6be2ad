// When the sidecar sends what it drained: its batching without a flag (issue 33; docs/results.md
// "Coordinator ingest through gRPC"). The coordinator's cost is per message, so a node sends
// several steps per message: up to `records_per_message` records, i.e. K steps of its ranks
// (K a power of two <= max_steps_per_message: 8 steps of an 8-GPU node).
//
// Batches end on step numbers, not on a timer: a job's records go out when every rank of the job
// on this node has finished a step s with (s + 1 + phase) % K == 0, or the last step of a verdict
// window ((s + 1) % window_steps == 0, so that a window's verdict never waits for a hold). The
// phase (phase_seed % K; the sidecar's seed comes from its node name, PhaseSeedFor) spreads a
// job's nodes over the K steps: a coordinator of 12,500 nodes gets an eighth of them at each
// step, not all of them every 8th step, and at a window's end each node sends only the steps
// since its own last batch (docs/results.md, session 45). The hold is also bounded in time —
// (K + 1) of the job's step times, measured from when each rank's steps were drained — for
// ranks that stop, skip steps or start mid-batch.
//
// What the coordinator said after the Hello (StreamLimits; HoldFor) bounds it: a hold never
// outlasts the coordinator's step deadline less 1 s (the coordinator's deadline counts from a
// step's first record: the node whose phase sends a step first, or one that sends early at an
// open-stage report or SIGTERM, must not make another's records of that step late), and K steps
// never span more than 80% of the job's stall limit, max(10 x step, stall_after_ms): the
// coordinator sees the job advance only when a batch comes. A coordinator that says no deadline
// (older) closes steps after 5 s: holds stay under 4 s, as before.
//
// No clock, no I/O: callers pass `now_ns`; the streamer adds the events that send at once
// (a full batch, SIGTERM, an open stage that passed its report threshold).
//
//   BatchHold hold(HoldFor({}, limits));
//   for (const v1::RankSteps& rs : drained) hold.Note(rs.job(), rs.rank(), last_step, now);
//   if (hold.Due(now, oldest_pending_ns)) { send(); hold.Sent(); }
#ifndef STAGEFRONTIER_DAEMON_SIDECAR_BATCH_HOLD_H_
#define STAGEFRONTIER_DAEMON_SIDECAR_BATCH_HOLD_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "stagefrontier/v1/ingest.pb.h"

namespace stagefrontier {

struct BatchHoldOptions {
  // Records per message the hold aims at: 64 is 8 steps of an 8-GPU node, the shape that holds
  // a 100,000-GPU job at 1 step/s on a quarter of a coordinator core (docs/results.md).
  int64_t records_per_message = 64;
  // At most this many steps per message (a power of two).
  int64_t max_steps_per_message = 8;
  // Never hold longer, whatever the coordinator allows; HoldFor caps it under the coordinator's
  // step deadline (less 1 s; 4 s for one that predates saying it, whose deadline is 5 s).
  int64_t max_hold_ns = 60'000'000'000;
  // Where this node's batches end among the K steps: at steps s with (s + 1 + phase_seed % K)
  // % K == 0 (and at a window's last step). Nodes with different seeds send on different steps;
  // 0 is every node's boundary on multiples of K. The sidecar takes PhaseSeedFor(its node name).
  uint64_t phase_seed = 0;
  // The coordinator's stall floor and verdict window (StreamLimits; HoldFor).
  int64_t stall_after_ns = 5'000'000'000;
  int64_t window_steps = 100;
  // A rank whose steps stopped coming for this long no longer holds its job's batches back (a
  // hung, finished or departed rank), and is forgotten after forget_after_ns.
  int64_t rank_idle_ns = 3'000'000'000;
  int64_t forget_after_ns = 60'000'000'000;
};

// A node's phase seed (BatchHoldOptions::phase_seed) from its name: the same name gives the same
// seed in every process, and a job's nodes spread about evenly over the phases.
uint64_t PhaseSeedFor(std::string_view node);

// `configured` inside what a coordinator said after the Hello: max_hold_ns under its step
// deadline (less 1 s, or half of it under 2 s), its stall floor and window. `limits` null, or
// a coordinator that predates saying its deadline: max_hold_ns at most 4 s.
BatchHoldOptions HoldFor(const BatchHoldOptions& configured, const v1::StreamLimits* limits);

// The sidecar's log line for it: the step deadline as HoldFor took it (a value the coordinator
// said that is out of range is not printed as if it were taken) and the hold that follows.
std::string DescribeHold(const v1::StreamLimits& limits, const BatchHoldOptions& hold);

class BatchHold {
 public:
  explicit BatchHold(BatchHoldOptions options = HoldFor({}, nullptr)) : options_(options) {}

  // New bounds (a coordinator's StreamLimits came, or a new stream opened); what is held stays.
  void set_options(const BatchHoldOptions& options);
  const BatchHoldOptions& options() const { return options_; }

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
  // How long the pending batch may wait: the shortest hold of the jobs with records in it.
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
    int64_t hold_ns = 0;   // this job's bound: (K + 1) steps, under max_hold_ns and the stall limit
    bool pending = false;  // has records in the pending batch
  };
  // Recomputes the job's complete step and steps per message.
  void Refresh(Job& job, int64_t now_ns) const;
  bool JobDue(const Job& job) const;

  BatchHoldOptions options_;
  std::map<std::string, Job, std::less<>> jobs_;
  int64_t last_gc_ns_ = 0;
  int64_t last_now_ns_ = 0;  // the latest Note's time: set_options refreshes the jobs at it
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIDECAR_BATCH_HOLD_H_
