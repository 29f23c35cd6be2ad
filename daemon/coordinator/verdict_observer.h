// What a job tells others when one of its "job" windows closes (not when a journal is
// replayed): the verdict and what the job knows around it. The capture trigger
// (daemon/captures/capture_trigger.h) is one such observer.
//
//   class Printer : public VerdictObserver {
//     void OnJobWindow(const ClosedJobWindow& w) override { puts(w.job.c_str()); }
//   };
//   options.verdict_observer = &printer;  // JobOptions
//
// Called with the job's lock held: an observer must be quick and must not call back into the
// job or take locks that are held while calling into jobs (queue work, send it later).
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_VERDICT_OBSERVER_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_VERDICT_OBSERVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/accounting/verdict.h"
#include "shm/stage_schema.h"
#include "stagefrontier/v1/ingest.pb.h"

namespace stagefrontier {

struct ClosedJobWindow {
  std::string job;
  const Verdict* verdict = nullptr;     // valid during the call only
  const StageSchema* schema = nullptr;  // the job's stages; valid during the call only
  std::vector<std::string> unreliable;  // detector-health conditions holding now
  std::vector<std::string> rank_nodes;  // by rank; "" where not known yet
  // By rank: 1 the trainer can take captures, 0 its stub said it cannot (no capture handler),
  // -1 not known yet (no health report; treated as cannot). Empty: every rank may be asked.
  std::vector<int8_t> rank_can_capture;
  int64_t newest_step = -1;
  v1::ControlRequest job_control;  // the job-wide settings every request must carry
  int64_t now_ns = 0;              // monotonic
};

class VerdictObserver {
 public:
  virtual ~VerdictObserver() = default;
  virtual void OnJobWindow(const ClosedJobWindow& window) = 0;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_VERDICT_OBSERVER_H_
