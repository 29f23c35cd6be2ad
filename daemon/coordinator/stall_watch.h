// A job's watch for stalls (docs/user-guide.md "Hangs"): where each rank is (the open stage its
// sidecar last reported), when the job's frontier last advanced, and the stall it is in, if
// any. Check decides with DecideStall (daemon/accounting/stall_decider.h) without waiting for a
// window, and returns an event when a stall begins, changes or ends. Not thread-safe: JobState
// holds it under its lock.
//
//   StallWatch watch(&schema, world_size, options);
//   watch.NotePosition(rank, slot_health, "node-a", now_ns, id);  // each sidecar health
//   watch.NoteAlive(rank, now_ns, id);                            // each batch of its steps
//   watch.SourceGone(rank, id);                                   // the sidecar's stream ended
//   watch.NoteStepTime(exposed_ns);                               // each closed step
//   if (auto e = watch.Check(now_ns, newest_step, ranks, paused, wall_ns)) journal(*e), tell(*e);
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_STALL_WATCH_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_STALL_WATCH_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "daemon/accounting/stall_decider.h"
#include "shm/stage_schema.h"
#include "stagefrontier/v1/ingest.pb.h"
#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

struct StallOptions {
  // The stall limit is max(10 x the job's median step, floor_ns), or fixed_ns when set (a
  // job's own limit, sfctl control --stall-after-ms).
  int64_t floor_ns = 5'000'000'000;
  int64_t fixed_ns = 0;
  // A group-wide pause (every rank in the same non-sync stage) alarms only past this.
  int64_t pause_alarm_ns = 300'000'000'000;
  // A rank whose sidecar has sent nothing for this long is lost, not stuck: shorter than the
  // stall floor, so that a dead sidecar's stale positions never read as a hang. Silence is
  // looked at only once the job has not advanced for its stall limit (>= the floor): by then
  // every live sidecar of the job sends health every second (a rank of its node has had a stage
  // open past 1 s) and has sent the steps it held (health_cadence.h, batch_hold.h); between
  // stalls a sidecar may be quiet for its batch hold (up to the step deadline less 1 s). A
  // sidecar whose stream ended is lost at once (SourceGone).
  int64_t silent_ns = 4'750'000'000;
  // Sidecars hold a step's records up to the step deadline less 1 s (batch_hold.h: 8 steps of
  // a 1 step/s job), so between batches a job can seem not to advance for that long. Until some
  // rank shows why it would not — a stall forming: a rank reported in the last 2.5 s with its
  // stage open past 1 s and about as long as the job has not advanced (every live sidecar then
  // reports every second and has sent what it held), or a rank's process or stream gone — the
  // limit is at least this. The coordinator sets it to its step deadline; 0: no holds.
  int64_t held_ns = 0;
};

// What JobState knows of a rank beside its position.
struct RankLiveness {
  bool finished = false;  // released its slot cleanly after reporting
  bool process_gone = false;
  bool raised = false;  // its trainer ended on an uncaught exception (then process_gone too)
  bool raised_in_collective = false;  // ... that a collective raised (a peer gone)
};

class StallWatch {
 public:
  StallWatch(const StageSchema* schema, int32_t world_size, StallOptions options);

  // `source` names the sidecar stream that reported (0: unknown); a position reported by a
  // stream that then ended is lost (SourceGone) until a stream reports the rank again.
  void NotePosition(int32_t rank, const v1::SlotHealth& health, const std::string& node,
                    int64_t now_ns, uint64_t source = 0);
  // The rank's sidecar sent something else (its steps): alive, its position unchanged.
  void NoteAlive(int32_t rank, int64_t now_ns, uint64_t source = 0);
  // Stream `source` ended: the rank is lost now if that stream was the last to report it.
  void SourceGone(int32_t rank, uint64_t source);
  void NoteStepTime(int64_t exposed_ns);
  void set_fixed_ns(int64_t ns) { options_.fixed_ns = ns; }
  int64_t LimitNs() const;

  // Decides at `now_ns` (monotonic; `wall_ns` realtime for the record). Returns the stall when
  // it began or changed reason, alarm or named ranks, and the ended stall (ended, stalled_ns:
  // its duration) when the job advanced again; nothing otherwise. A paused job is not stalled.
  std::optional<v1::Stall> Check(int64_t now_ns, int64_t newest_step,
                                 std::span<const RankLiveness> liveness, bool paused,
                                 int64_t wall_ns);
  // A stall journaled before a restart: reported until the job advances or its ranks are
  // heard from again (then they decide).
  void Restore(const v1::Stall& stall);
  // Ends the stall in progress now (a later run of the job superseded this one); the ended
  // stall, or nothing when none was open.
  std::optional<v1::Stall> Close(int64_t wall_ns);

  // The stall in progress (its figures as of the last Check), or null.
  const v1::Stall* current() const { return open_ ? &stall_ : nullptr; }
  // The rank's open stage, its age at `now_ns`.
  void FillRank(int32_t rank, int64_t now_ns, v1::RankHealth* out) const;

 private:
  struct Position {
    bool known = false;
    int64_t step = -1;
    int32_t stage = -1;
    int64_t age_ns = 0;   // as reported
    int64_t seen_ns = 0;  // when (monotonic, this process); 0: never
    int64_t alive_ns = 0;  // the sidecar's latest message about the rank (health or steps)
    uint64_t source = 0;   // the stream that sent it
    bool source_gone = false;
    std::string node;
  };
  int64_t OpenNs(const Position& p, int64_t now_ns) const;
  // Whether the rank's report shows a stall forming (see held_ns); `since`: since the job last
  // advanced.
  bool Forming(const Position& p, const RankPosition& at, int64_t now_ns, int64_t since) const;
  v1::Stall ToProto(const StallDecision& d, const std::vector<RankPosition>& at, int64_t since,
                    int64_t limit, int64_t wall_ns) const;
  static bool SameStall(const v1::Stall& a, const v1::Stall& b);

  const StageSchema* schema_;
  StallOptions options_;
  std::vector<Position> positions_;
  std::deque<int64_t> step_ns_;  // the last closed steps' exposed times
  int64_t progress_step_ = -1;
  int64_t progress_ns_ = 0;
  bool open_ = false;
  bool restored_ = false;    // open since a restart, no Check has seen the job advance since
  int64_t restored_ns_ = 0;  // the first Check after the restore
  v1::Stall stall_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_STALL_WATCH_H_
