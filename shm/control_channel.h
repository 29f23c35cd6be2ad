// Control requests from the coordinator to one stub, carried by the slot's control block
// (segment_layout_v1.h): "pause", "record one step in N", "capture a detailed trace for steps
// N..M". The sidecar is the only writer (PostControl); the stub polls once per step
// (PollControl: one acquire load when nothing changed) and acknowledges what it applied.
//
//   ControlRequest req; req.trace_first_step = 100; req.trace_last_step = 109;
//   PostControl(view.slot(3), req);                    // sidecar
//   uint64_t seen = 0; ControlRequest now;
//   if (PollControl(view.slot(3), &seen, &now)) { ... }  // stub, at the start of a step
#ifndef STAGEFRONTIER_SHM_CONTROL_CHANNEL_H_
#define STAGEFRONTIER_SHM_CONTROL_CHANNEL_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "shm/segment_layout_v1.h"

namespace stagefrontier::shm {

struct ControlRequest {
  bool paused = false;
  uint32_t sample_every = 1;     // record one step in N; 0 and 1 mean every step
  int64_t trace_first_step = 0;  // capture a trace for steps in [first, last];
  int64_t trace_last_step = -1;  // last < first means no capture
  uint64_t request_id = 0;
  // Self-test: add selftest_delay_us to stage selftest_stage in steps [first, last]
  // (sfctl selftest). None when the delay is 0 or last < first.
  uint32_t selftest_stage = 0;
  uint32_t selftest_delay_us = 0;
  int64_t selftest_first_step = 0;
  int64_t selftest_last_step = -1;

  // True if the request carries a self-test.
  bool HasSelfTest() const {
    return selftest_delay_us > 0 && selftest_last_step >= selftest_first_step;
  }
  // True if `step` lies in the trace window.
  bool CapturesTrace(int64_t step) const {
    return step >= trace_first_step && step <= trace_last_step;
  }
  // True if `step` is one of the sampled steps.
  bool Samples(int64_t step) const {
    return sample_every <= 1 || (step >= 0 && step % sample_every == 0);
  }
  bool operator==(const ControlRequest&) const = default;
};

// ControlRequest.sets on the wire (proto/stagefrontier/v1/ingest.proto): which rank-targeted
// fields a request changes; the sidecar keeps the others in the slot's control block.
inline constexpr uint32_t kControlSetsTrace = 1U << 0;
inline constexpr uint32_t kControlSetsSelfTest = 1U << 1;
// A stack dump (hang evidence): the sidecar stores ControlRequest.stacks_capture_id in the
// slot's dump_request_id and signals the owner (daemon/sidecar/owner_signal.h).
inline constexpr uint32_t kControlSetsStacks = 1U << 2;

// Writes `request` into the slot's control block (sidecar side; one writer per segment).
// Returns the new sequence number.
uint64_t PostControl(v1::SlotHeader& slot, const ControlRequest& request);

// Stub side: answers the self-test request whose first step is `first_step`
// (v1::SelfTestState), and counts the steps the delay was added to.
void AnswerSelfTest(v1::SlotHeader& slot, int64_t first_step, v1::SelfTestState state) noexcept;
void CountSelfTestStep(v1::SlotHeader& slot) noexcept;

// Stub side: answers the capture request whose trace window starts at `first_step`
// (v1::CaptureState; `failure` for kCaptureFailed, `bytes` for kCaptureDone).
void AnswerCapture(v1::SlotHeader& slot, int64_t first_step, v1::CaptureState state,
                   v1::CaptureFailure failure, uint64_t bytes) noexcept;

// Names of capture answers ("running", "done", "failed"; failures "busy", "start", "write",
// "callback", "missed"), as sfctl shows them and stagefrontier.torch passes them; "unknown"
// for a value this build does not know. Parse* return nullopt for an unknown name.
const char* CaptureStateName(uint32_t state);
const char* CaptureFailureName(uint32_t failure);
std::optional<v1::CaptureState> ParseCaptureState(std::string_view name);
std::optional<v1::CaptureFailure> ParseCaptureFailure(std::string_view name);

// Stub side. If the control block changed since `*seen_seq`, copies a consistent request into
// `*out`, sets `*seen_seq`, acknowledges it in the slot and returns true. Returns false when
// nothing changed or the sidecar is mid-write (the next poll will see it). Never blocks.
bool PollControl(v1::SlotHeader& slot, uint64_t* seen_seq, ControlRequest* out) noexcept;

}  // namespace stagefrontier::shm

#endif  // STAGEFRONTIER_SHM_CONTROL_CHANNEL_H_
