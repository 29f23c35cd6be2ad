// What a job tells when its windows close: the closed-window observer. A job holds one list of
// them (JobOptions::observers) and tells each, in list order, of every closed "job" window but
// replayed ones (OnJobWindow), then, once per closed step that appended verdicts (replayed
// ones included), OnVerdictsAppended. The node ledger, the capture trigger and the verdict
// bell are such observers.
//
//   class Printer : public VerdictObserver {
//     void OnJobWindow(const ClosedJobWindow& w) override { puts(w.job.c_str()); }
//   };
//   options.observers = {ledger, &printer};  // JobOptions
//
// Called with the job's lock held: an observer must be quick and must not call back into the
// job or take locks that are held while calling into jobs (queue work, send it later).
#ifndef STAGEFRONTIER_DAEMON_EVENTS_VERDICT_OBSERVER_H_
#define STAGEFRONTIER_DAEMON_EVENTS_VERDICT_OBSERVER_H_

#include <cstdint>
#include <string>

#include "daemon/events/closed_window.h"
#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

class VerdictObserver {
 public:
  virtual ~VerdictObserver() = default;
  // A closed "job" window (never a replayed one).
  virtual void OnJobWindow(const ClosedJobWindow& window) {}
  // A closed step appended verdicts of any group, replayed ones included; after OnJobWindow.
  virtual void OnVerdictsAppended() {}
  // Every rank of `job` released its slot cleanly after reporting (the stubs exited): no step
  // past `last_step` will come. Told once per change to finished (a rank that comes back and
  // finishes again tells it again); `now_ns` monotonic. Windows still open may close after it.
  virtual void OnJobFinished(const std::string& job, int64_t last_step, int64_t now_ns) {}
  // `job`'s stall began, changed (its reason, alarm or named ranks) or ended (stall.ended()),
  // never replayed (daemon/coordinator/stall_watch.h). `wall_ns`: realtime now.
  virtual void OnJobStall(const std::string& job, const v1::Stall& stall, int64_t wall_ns) {}
  // `job` (a run's name, GenerationName) left the coordinator's memory (JobRegistry: retired
  // when idle, or an earlier run beyond those kept): forget what is kept for it, so that a
  // coordinator serving job after job does not grow. Told under the registry's lock (no job's):
  // quick, and calling into no job or registry; a job of that name may come back later
  // (restored from its journal), and is told of after this returns.
  virtual void OnJobRetired(const std::string& job) {}
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_EVENTS_VERDICT_OBSERVER_H_
