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
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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
};

class SelfTestBook {
 public:
  explicit SelfTestBook(SelfTestLimits limits = {}) : limits_(limits) {}

  // Records a new self-test `id` and returns the control request to send to the sidecar of
  // the rank. InvalidArgument (naming the value and the allowed range) for a rank outside the
  // world, an unknown stage (the message lists the schema's stages), a delay or step count
  // outside 1..limit; FailedPrecondition before the job has reported any step.
  [[nodiscard]] absl::StatusOr<v1::ControlRequest> Start(const SelfTestJobFacts& job,
                                                         const v1::SelfTestCommand& command,
                                                         uint64_t id, int64_t now_ns);
  // Forgets self-test `id` of `job` (its request reached no sidecar).
  void Cancel(const std::string& job, uint64_t id);
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
  };
  void Judge(const Test& t, const std::vector<v1::VerdictEvent>& verdicts, int64_t now_ns,
             v1::SelfTestReport* out) const;

  const SelfTestLimits limits_;
  mutable std::mutex mu_;
  std::map<std::string, std::vector<Test>> tests_;  // by job, oldest first
};

// "CLEAR data rank 3 (steps 51..100)": one line for a window, as self-test reports list them.
std::string WindowLine(const v1::Verdict& v);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_SELF_TESTS_H_
