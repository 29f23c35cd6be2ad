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

#include "daemon/events/closed_window.h"

namespace stagefrontier {

class VerdictObserver {
 public:
  virtual ~VerdictObserver() = default;
  // A closed "job" window (never a replayed one).
  virtual void OnJobWindow(const ClosedJobWindow& window) {}
  // A closed step appended verdicts of any group, replayed ones included; after OnJobWindow.
  virtual void OnVerdictsAppended() {}
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_EVENTS_VERDICT_OBSERVER_H_
