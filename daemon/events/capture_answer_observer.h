// What the ingest streams tell about the stubs' capture answers (the slot's capture_state,
// relayed in every health report): the capture trigger implements it, so that a capture whose
// ranks all answered done or failed ends without waiting for its steps to pass, and so that
// `sfctl captures` shows each rank's answer.
//
//   class MyTrigger : public CaptureAnswerObserver {
//     void OnCaptureAnswer(const std::string& job, const v1::SlotHealth& h) override { ... }
//   };
//   ingest.SetCaptureAnswerObserver(&my_trigger);
#ifndef STAGEFRONTIER_DAEMON_EVENTS_CAPTURE_ANSWER_OBSERVER_H_
#define STAGEFRONTIER_DAEMON_EVENTS_CAPTURE_ANSWER_OBSERVER_H_

#include <string>

#include "stagefrontier/v1/ingest.pb.h"

namespace stagefrontier {

class CaptureAnswerObserver {
 public:
  virtual ~CaptureAnswerObserver() = default;
  // Called from ingest threads for every slot health that carries an answer
  // (capture_state != 0), repeated at every report: implementations ignore repeats.
  virtual void OnCaptureAnswer(const std::string& job, const v1::SlotHealth& health) = 0;
  // Called from ingest threads with each sidecar's answer to a control request (a refusal
  // says why in ack.error): a stack request's answer says whether the rank was signalled.
  virtual void OnControlAck(const v1::ControlAck& ack) {}
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_EVENTS_CAPTURE_ANSWER_OBSERVER_H_
