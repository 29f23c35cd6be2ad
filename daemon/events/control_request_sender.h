// Sends a control request to the sidecar serving a rank: the seam between those that decide
// what the stubs should be told (the capture trigger, daemon/captures) and the coordinator's
// connected sidecars (SidecarSessions, daemon/coordinator/sidecar_sessions.h, implements it),
// so that deciders need not depend on the coordinator.
//
//   int Flush(ControlRequestSender* sender) {
//     v1::ControlRequest req;  req.set_job("run42");  req.set_rank(3);
//     return sender->Send(req);  // 0: no sidecar serves that rank now
//   }
#ifndef STAGEFRONTIER_DAEMON_EVENTS_CONTROL_REQUEST_SENDER_H_
#define STAGEFRONTIER_DAEMON_EVENTS_CONTROL_REQUEST_SENDER_H_

#include "stagefrontier/v1/ingest.pb.h"

namespace stagefrontier {

class ControlRequestSender {
 public:
  virtual ~ControlRequestSender() = default;
  // Sends `request` to whoever serves (job, rank), or every rank of the job when rank is -1.
  // Returns how many sidecars it reached. Never blocks on a slow reader.
  virtual int Send(const v1::ControlRequest& request) = 0;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_EVENTS_CONTROL_REQUEST_SENDER_H_
