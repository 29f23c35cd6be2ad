// Self-tests on a live job (sfctl selftest): the coordinator asks one rank's stub to add a
// known, bounded delay to one stage for a few steps, then reads its own verdicts to say
// whether they found it, and how much of the delay they measured. A per-deployment check of
// the detector: what no simulator can say about this cluster's noise.
//
// The book keeps every self-test of every job: the request, the stub's answer (carried by the
// sidecar's health reports), the marked records that arrived, and the verdict windows that
// cover the delayed steps. It does not hold a JobState: callers pass what it needs, so every
// rule here is tested with exact inputs.
//
//   SelfTestBook book;
//   auto req = book.Start(job_facts, command, id, now_ns);  // Control(selftest)
//   if (req.ok()) sessions.Send(*req);
//   book.OnStubAnswer("run42", slot_health, now_ns);          // each health report
//   book.OnMarkedSteps("run42", 3, 20);                       // each ingested batch
//   book.Report("run42", 0, verdict_events, now_ns, &reply);  // GetSelfTests
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_SELF_TESTS_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_SELF_TESTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "stagefrontier/v1/ingest.pb.h"
#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

// What Start needs to know about the job.
struct SelfTestJobFacts {
  std::string job;
  int32_t world_size = 0;
  std::vector<std::string> stages;  // the schema's stage names, in order
  int64_t newest_step = -1;         // the newest step any rank reported
  int64_t step_ns = 0;              // a recent median step duration; 0 if unknown
};

struct SelfTestLimits {
  uint32_t max_delay_ms = 1000;  // the stub's own cap (Client::kMaxSelfTestDelayUs)
  uint32_t max_steps = 1000;     // the stub's own cap (Client::kMaxSelfTestSteps)
  // Automatic lead: at least this many steps, and at least this much time, so that the request
  // reaches the stub before its first step.
  int64_t min_lead_steps = 20;
  int64_t lead_ns = 3'000'000'000;
  // A request the stub has not answered by then is reported "unanswered".
  int64_t answer_timeout_ns = 30'000'000'000;
  size_t kept_per_job = 256;  // the oldest self-tests of a job are forgotten beyond this
  // A self-test slows a live job: at most this many run at once in a job and in all jobs, and
  // a job gets at most this many delayed steps an hour.
  int max_running_per_job = 1;
  int max_running = 4;
  int64_t max_steps_per_hour = 2000;
  // A running self-test whose result nobody asked for (GetSelfTests with its id) this long is
  // cancelled: the client that started it went away (sfctl polls every second).
  int64_t lease_ns = 30'000'000'000;
};

// What running self-tests cost a job now, for sfctl health.
struct SelfTestLoad {
  int running = 0;              // in the job
  int running_all = 0;          // in every job
  int64_t steps_last_hour = 0;  // delayed steps asked in the last hour
  SelfTestLimits limits;
};

class SelfTestBook {
 public:
  explicit SelfTestBook(SelfTestLimits limits = {}) : limits_(limits) {}

  // Records a new self-test `id` and returns the control request to send to the sidecar of
  // the rank. InvalidArgument (naming the value and the allowed range) for a rank outside the
  // world, an unknown stage (the message lists the schema's stages), a delay or step count
  // outside 1..limit; FailedPrecondition before the job has reported any step;
  // ResourceExhausted when max_running_per_job or max_running self-tests run already, or
  // the job's hourly budget of delayed steps would be passed.
  [[nodiscard]] absl::StatusOr<v1::ControlRequest> Start(const SelfTestJobFacts& job,
                                                         const v1::SelfTestCommand& command,
                                                         uint64_t id, int64_t now_ns);
  // Forgets self-test `id` of `job` (its request reached no sidecar).
  void Forget(const std::string& job, uint64_t id);
  // Cancels running self-test `id` of `job` (its report says `why`) and returns the request
  // that makes the rank's stub stop delaying. NotFound for an unknown id, FailedPrecondition
  // for one that is not running.
  [[nodiscard]] absl::StatusOr<v1::ControlRequest> Cancel(const std::string& job, uint64_t id,
                                                          int64_t newest_step,
                                                          const std::string& why);
  // Cancels the running self-tests whose lease ran out (see SelfTestLimits::lease_ns); returns
  // the requests to send. `newest_step` gives each job's newest step.
  std::vector<v1::ControlRequest> ExpireLeases(
      int64_t now_ns, const std::function<int64_t(const std::string& job)>& newest_step);
  // Someone asked for self-test `id`'s result now: its lease is renewed.
  void Renew(const std::string& job, uint64_t id, int64_t now_ns);
  SelfTestLoad Load(const std::string& job, int64_t newest_step, int64_t now_ns) const;
  // A sidecar's health report of one slot: the stub's answer to the latest request, if any.
  void OnStubAnswer(const std::string& job, const v1::SlotHealth& health);
  // `n` records marked kRecordSelfTestDelay arrived from (job, rank).
  void OnMarkedSteps(const std::string& job, int32_t rank, uint32_t n);

  // Fills `out` with self-test `id` of `job` (0: all of them, oldest first), judged against
  // `verdicts` (the job's closed windows, oldest first). NotFound for an unknown id.
  [[nodiscard]] absl::Status Report(const std::string& job, uint64_t id,
                                    const std::vector<v1::VerdictEvent>& verdicts, int64_t now_ns,
                                    v1::GetSelfTestsReply* out) const;

 private:
  struct Test {
    v1::SelfTestReport report;  // request fields; the rest is filled by Report
    int64_t started_ns = 0;
    uint32_t stub_state = 0;  // v1::SelfTestState from the stub, 0 before its answer
    uint32_t steps_done = 0;
    uint32_t steps_marked = 0;
    int64_t renewed_ns = 0;   // the lease (Renew)
    std::string cancelled;    // why, once cancelled
    int64_t cancel_step = 0;  // the job's newest step when it was cancelled
  };
  // The steps `t` delays: all it asked for, or those before its cancellation.
  static int64_t DelayedSteps(const Test& t);
  // Whether `t` may still delay steps: not cancelled or refused, its last step not yet past.
  static bool Running(const Test& t, int64_t newest_step);
  // The request for self-test `r` to rank r.rank(): `delay_us` on stage index `stage`; a delay
  // of 0 stops it.
  static v1::ControlRequest Request(const std::string& job, const v1::SelfTestReport& r,
                                    uint32_t stage, uint32_t delay_us);
  // Self-tests running in `job` ("": every job), judged by newest_step_.
  int RunningLocked(const std::string& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Delayed steps asked of `job` in the hour before `now_ns`.
  int64_t StepsLastHourLocked(const std::string& job, int64_t now_ns) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ResourceExhausted when a new self-test of `steps` steps in `job` would pass a limit.
  absl::Status CheckLoadLocked(const std::string& job, uint32_t steps, int64_t now_ns) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Judge(const Test& t, const std::vector<v1::VerdictEvent>& verdicts, int64_t now_ns,
             v1::SelfTestReport* out) const;

  const SelfTestLimits limits_;
  mutable Mutex mu_;
  std::map<std::string, std::vector<Test>> tests_ ABSL_GUARDED_BY(mu_);  // by job, oldest first
  // By job: its newest step, as last told (Start, Cancel, ExpireLeases, Load).
  mutable std::map<std::string, int64_t> newest_step_ ABSL_GUARDED_BY(mu_);
};

// "CLEAR data rank 3 (steps 51..100)": one line for a window, as self-test reports list them.
std::string WindowLine(const v1::Verdict& v);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_SELF_TESTS_H_
