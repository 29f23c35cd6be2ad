// The stall decision (docs/user-guide.md "Hangs"): the one verdict step that does not wait for a
// window to close. When the job's frontier has not advanced for the stall limit, it says why
// from where each rank is right now (its stub's open stage, published in its slot, and whether
// its process and its sidecar are still there):
//
//   hung              some ranks in a non-sync stage or an earlier step while the others wait
//                     in a sync stage: those ranks, their stage, step and time stuck
//   dead              a rank's process is gone: that rank, its node and its last open stage
//   desync            every rank waits in a sync stage, but not the same stage and step
//   collective        every rank waits in the same sync stage and step (nothing on the host
//                     side holds it: the network, a collective that never completes)
//   group_wide_pause  every rank in the same non-sync stage (a checkpoint, an evaluation): no
//                     rank named, an alarm only past pause_alarm_after_ns
//   sidecar_lost      the ranks not heard from are those of sidecars that stopped reporting:
//                     the monitoring broke, not the job
//   unknown           the stubs do not say where they are (older builds); nothing at all is
//                     decided about ranks not heard from since the coordinator started
//
//   StallInputs in{schema, ranks, since_progress_ns, stall_after_ns, pause_alarm_after_ns};
//   StallDecision d = DecideStall(in);
//   if (d.kind != StallKind::kNone) ... d.text ...
//
// Cheap by construction: one pass over the ranks plus a sort of the few named (measured at
// 16,384 ranks by //tests/daemon/coordinator:stall_benchmark; docs/results.md "Hangs").
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_STALL_DECIDER_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_STALL_DECIDER_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shm/stage_schema.h"

namespace stagefrontier {

// Where one rank is, as its sidecar last said.
struct RankPosition {
  bool heard = false;         // its sidecar reported its health since this process started
  bool known = false;         // the stub publishes its open stage and the sidecar reported it
  int64_t step = -1;          // the open step
  int32_t stage = -1;         // the open stage; -1 between steps
  int64_t open_ns = 0;        // how long it has been open, now
  bool process_gone = false;  // the slot's owner process is dead (same PID namespace)
  bool raised = false;        // it ended on an uncaught exception (process_gone is set too)
  // ... that a collective raised (the process group's error: a peer gone), wherever its open
  // stage is (a compute stage may hold a collective: DDP's forward broadcasts).
  bool raised_in_collective = false;
  bool sidecar_lost = false;  // its sidecar stopped reporting
  bool finished = false;      // released its slot cleanly: the rank ended, not stuck
  std::string_view node;      // valid during DecideStall
};

struct StallInputs {
  const StageSchema& schema;
  std::span<const RankPosition> ranks;  // by rank
  int64_t since_progress_ns = 0;        // since the job's frontier last advanced
  int64_t stall_after_ns = 0;           // the limit: no stall below it
  int64_t pause_alarm_after_ns = 0;     // a group-wide pause alarms only past this
};

enum class StallKind {
  kNone,
  kHung,
  kDead,
  kDesync,
  kCollective,
  kGroupWidePause,
  kSidecarLost,
  kUnknown,
};

// "", "hung", "dead", "desync", "collective", "group_wide_pause", "sidecar_lost", "unknown".
const char* StallKindName(StallKind kind);

struct NamedRank {
  int32_t rank = -1;
  std::string role;  // stuck, dead, waiting, lost
};

inline constexpr size_t kWaitingNamed = 8;
// Stuck, dead or lost ranks named at most (the rest counted in the text): a whole job killed
// at 16,384 ranks is one bounded message, not 16,384 entries.
inline constexpr size_t kCulpritsNamed = 64;

struct StallDecision {
  StallKind kind = StallKind::kNone;
  bool alarm = false;  // a group-wide pause under its limit is not an alarm
  // Stuck or dead first (longest open first), then at most kWaitingNamed of the waiting: a
  // job of 16,384 ranks names its culprits, not everyone who waits for them.
  std::vector<NamedRank> named;
  int32_t waiting = 0;  // ranks waiting, named or not
  std::string text;     // one line for people
};

// Decides from `in` alone; kNone while since_progress_ns < stall_after_ns or every rank ended.
StallDecision DecideStall(const StallInputs& in);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_STALL_DECIDER_H_
