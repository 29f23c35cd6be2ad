// The event a job raises when one of its "job" windows closes (not when a journal is
// replayed): the verdict and what the job knows around it, in one struct so that every
// consumer (the node ledger, the capture trigger) reads the same snapshot. Observers get it
// through VerdictObserver::OnJobWindow (verdict_observer.h).
//
//   ClosedJobWindow w;
//   w.job = "run42";  w.world_size = 8;  w.verdict = &verdict;  w.schema = &schema;
//   w.rank_nodes = {"node-a", "node-a", ...};
//   for (VerdictObserver* o : observers) o->OnJobWindow(w);
#ifndef STAGEFRONTIER_DAEMON_EVENTS_CLOSED_WINDOW_H_
#define STAGEFRONTIER_DAEMON_EVENTS_CLOSED_WINDOW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/accounting/verdict.h"
#include "shm/stage_schema.h"
#include "stagefrontier/v1/ingest.pb.h"

namespace stagefrontier {

struct ClosedJobWindow {
  std::string job;
  int32_t world_size = 0;
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
  int64_t wall_time_ns = 0;        // realtime, for records that outlive the process
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_EVENTS_CLOSED_WINDOW_H_
