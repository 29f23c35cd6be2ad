// When to capture profiler traces, of which ranks and which steps: the coordinator's side of
// "from a verdict to the operator" (issue 16). For each closed verdict the policy either asks
// the suspect ranks and a few reference ranks to capture the same future steps, or says why
// not; every decision is kept, so a user can see why a capture was or was not taken.
//
//   CapturePolicy policy(CapturePolicyOptions{});
//   CaptureJobFacts facts{.node_of_rank = nodes, .newest_step = 4211, .steps_per_second = 9.5};
//   CaptureDecision d = policy.OnVerdict("llama", verdict, facts, now_ns);
//   if (d.asked) send_capture_request(d.ranks(), d.first_step, d.steps);
//   ...
//   policy.OnCaptureFinished("llama", d.id, now_ns);   // done, failed or abandoned
//
// Not thread-safe: the job's owner calls it (the coordinator holds the job's lock).
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_POLICY_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_POLICY_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/accounting/verdict.h"

namespace stagefrontier {

struct CapturePolicyOptions {
  bool on_clear = true;      // capture on CLEAR verdicts
  bool on_ambiguous = true;  // and on AMBIGUOUS ones that name ranks (never group-wide)
  bool on_healthy = false;   // HEALTHY windows name no suspect worth a capture
  int32_t references = 2;    // reference ranks per capture
  int32_t max_suspects = 4;  // candidate ranks of a TIE captured at most
  int32_t steps = 5;         // steps captured
  // The first captured step lies at least this far ahead, and far enough that the request
  // reaches every rank first: delivery_seconds at the job's step rate. The coordinator's tick
  // pushes it on the sidecar's stream within 10 ms and the sidecar posts it to the slots at
  // once (milliseconds end to end here); the rest is margin for a busy network or a sidecar
  // reconnecting (a rank asked too late answers "missed"). Until 2026-11-24 it was 5 s, which
  // put captures after the end of short jobs.
  int32_t min_lead_steps = 10;
  double delivery_seconds = 1.0;
  int32_t cooldown_windows = 3;  // verdict windows after a capture before the next one
  int32_t max_per_hour = 6;
  int32_t max_stacks_per_hour = 6;  // stack captures at stalls, per job
  // A capture not reported finished this long after its last step is abandoned.
  double finish_timeout_seconds = 300;
  size_t decisions_kept = 64;  // per job

  // InvalidArgument naming the field for a value out of range.
  [[nodiscard]] absl::Status Validate() const;
};

// What the policy knows of a job when it decides.
struct CaptureJobFacts {
  std::vector<int32_t> ranks;                   // the job's ranks, ascending
  std::map<int32_t, std::string> node_of_rank;  // where known
  int64_t newest_step = -1;                     // newest step accounted
  double steps_per_second = 0;                  // recent step rate; 0 when unknown
  std::vector<std::string> stage_names;         // the job's stages, in order
  // The newest verdict that named a rank: a capture asked by hand that includes this rank is
  // analysed as this rank's against the others', in this stage.
  int32_t focus_rank = -1;
  std::string focus_stage;
  // Ranks whose stub said its trainer has no capture handler: never asked automatically
  // (a capture asked by hand still is).
  std::set<int32_t> cannot_capture;
};

// What a capture takes: a profiler trace of future steps, or every thread's stack of the ranks a
// stall names, at once (docs/user-guide.md "Evidence at the moment of the hang").
enum class CaptureKind { kTrace, kStacks };

struct CaptureDecision {
  CaptureKind kind = CaptureKind::kTrace;
  uint64_t id = 0;  // > 0 when asked
  bool asked = false;
  std::string reason;  // why asked, or why skipped
  std::vector<int32_t> suspects;
  std::vector<int32_t> references;
  std::string stage;  // the stage the analysis compares; "" when none (not analysed)
  int64_t first_step = -1;
  int32_t steps = 0;
  int64_t decided_ns = 0;
  int64_t verdict_last_step = -1;
  bool manual = false;
  // Why it will never be taken, once known: the job ended, or stalled, before first_step.
  std::string missed;
  // Stacks: where each asked rank was when asked ("stuck in forward at step 150 for 12 s"),
  // and when (realtime): a rank whose file has not come after kStacksWaitNs is reported
  // without it. first_step is the stall's step and stage the stuck rank's.
  std::map<int32_t, std::string> notes;
  int64_t decided_unix_ns = 0;

  // suspects then references.
  std::vector<int32_t> ranks() const;
};

// How long a stack capture's report waits for the files of its ranks.
inline constexpr int64_t kStacksWaitNs = 30'000'000'000;

// A stall as the policy sees it (the coordinator's v1::Stall): its kind ("hung", "dead",
// "desync", "collective", ...), and the ranks it names with their role (stuck, dead, waiting,
// lost) and open stage.
struct CaptureStallFacts {
  struct Rank {
    int32_t rank = -1;
    std::string role;
    std::string stage;
    int64_t step = -1;
    int64_t open_ns = 0;
  };
  std::string kind;
  bool alarm = false;
  bool ended = false;
  int64_t started_unix_ns = 0;  // one stack capture per stall
  std::string text;
  std::vector<Rank> ranks;
};

// One rank's answer to a capture, from its stub (shm CaptureState / CaptureFailure values).
struct RankCaptureAnswer {
  int32_t rank = -1;
  uint32_t state = 0;  // 0: no answer yet
  uint32_t failure = 0;
  uint64_t bytes = 0;
  std::string error;  // stacks: why the sidecar did not signal the rank
  bool operator==(const RankCaptureAnswer&) const = default;
};

class CapturePolicy {
 public:
  explicit CapturePolicy(CapturePolicyOptions options) : options_(std::move(options)) {}

  // Decides on one closed verdict of `job`. Skipped (asked false, a reason) for a label the
  // options leave out, a group-wide or rank-less verdict, an unreliable one, a capture in
  // flight, the cooldown, the hourly cap, or a job too small for a reference rank.
  CaptureDecision OnVerdict(const std::string& job, const Verdict& verdict,
                            const CaptureJobFacts& facts, int64_t now_ns);

  // A capture asked by a person (`sfctl capture`): the given ranks, `steps` steps from the
  // first step far enough ahead. Refused (FailedPrecondition) while one is in flight; the
  // cooldown and the hourly cap do not apply. InvalidArgument for an empty list, a rank
  // outside the job or steps outside [1, 100].
  [[nodiscard]] absl::StatusOr<CaptureDecision> Manual(const std::string& job,
                                                       const std::vector<int32_t>& ranks,
                                                       int32_t steps, const CaptureJobFacts& facts,
                                                       int64_t now_ns);

  // On a stall that is an alarm (hung, dead, desync, collective): asks the stuck ranks (at most
  // two) and one waiting rank for their stacks at once, once per stall and at most
  // max_stacks_per_hour per job. A dead rank is not asked (its process is gone). Not asked:
  // an empty decision, not kept, for a stall already asked or not an alarm; kept with the
  // reason otherwise. Independent of the trace capture in flight.
  CaptureDecision OnStall(const std::string& job, const CaptureStallFacts& stall, int64_t now_ns,
                          int64_t wall_ns);

  // The capture `id` of `job` ended (its files arrived, or it failed): the next may start.
  void OnCaptureFinished(const std::string& job, uint64_t id, int64_t now_ns);
  // The capture `id` of `job` can never be taken (`why`: the job ended before its first step):
  // kept in its decision's `missed`, and it ends as OnCaptureFinished.
  void OnCaptureMissed(const std::string& job, uint64_t id, const std::string& why, int64_t now_ns);

  // The job's decisions, oldest first (at most options.decisions_kept).
  std::vector<CaptureDecision> Decisions(const std::string& job) const;
  // Forgets everything kept for the job (it left the coordinator's memory).
  void Forget(const std::string& job) { jobs_.erase(job); }

  const CapturePolicyOptions& options() const { return options_; }
  void set_options(CapturePolicyOptions options) { options_ = std::move(options); }

 private:
  struct JobBook {
    uint64_t in_flight = 0;  // capture id, 0 when none
    int64_t in_flight_deadline_step = -1;
    int64_t in_flight_since_ns = 0;
    int64_t windows_since_capture = -1;   // -1: never captured
    std::deque<int64_t> asked_ns;         // within the last hour
    std::deque<int64_t> stacks_asked_ns;  // likewise, stack captures
    int64_t stacks_for_stall = 0;         // the started_unix_ns of the stall last asked
    std::deque<CaptureDecision> decisions;
  };
  int64_t FirstStep(const CaptureJobFacts& facts) const;
  // Clears an in-flight capture whose time is long past.
  void Expire(JobBook& book, const CaptureJobFacts& facts, int64_t now_ns) const;
  CaptureDecision Keep(JobBook& book, CaptureDecision d);

  CapturePolicyOptions options_;
  std::map<std::string, JobBook> jobs_;
  uint64_t next_id_ = 1;

 public:
  // Ids go on from `first` (a restarted coordinator starts past the ids it wrote before, so a
  // new capture never takes an old one's files or report). Ignored below the next id.
  void SeedNextId(uint64_t first) { next_id_ = std::max(next_id_, first); }
};

// What kind of reason a decision's is: its text before the first ':' ("cooldown", "capture 3
// in flight", "HEALTHY"); repeated skips of one kind are kept and logged once.
std::string ReasonKind(const std::string& reason);

// Up to `count` reference ranks for `suspects`: ranks that are not suspects, preferring ranks
// on nodes other than the suspects' (so a node-wide cause does not hide in the comparison),
// spread evenly over the job's ranks. Fewer when the job has fewer such ranks.
std::vector<int32_t> PickReferences(const std::vector<int32_t>& suspects,
                                    const CaptureJobFacts& facts, int32_t count);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_POLICY_H_
