#include "shm/control_channel.h"

#include <atomic>
#include <iterator>

namespace stagefrontier::shm {

uint64_t PostControl(v1::SlotHeader& slot, const ControlRequest& request) {
  v1::ControlBlock& c = slot.control;
  const uint64_t s = c.seq.load(std::memory_order_relaxed);
  const uint64_t odd = (s | 1) + ((s & 1) ? 2 : 0);  // next odd value
  c.seq.store(odd, std::memory_order_relaxed);
  // Release stores keep the odd sequence number ahead of every field (no fences: TSan does
  // not model them). A reader that sees any new field then sees the odd number.
  c.flags.store(request.paused ? v1::kControlPaused : 0, std::memory_order_release);
  c.sample_every.store(request.sample_every, std::memory_order_release);
  c.trace_first_step.store(request.trace_first_step, std::memory_order_release);
  c.trace_last_step.store(request.trace_last_step, std::memory_order_release);
  c.request_id.store(request.request_id, std::memory_order_release);
  c.selftest_stage.store(request.selftest_stage, std::memory_order_release);
  c.selftest_delay_us.store(request.selftest_delay_us, std::memory_order_release);
  c.selftest_first_step.store(request.selftest_first_step, std::memory_order_release);
  c.selftest_last_step.store(request.selftest_last_step, std::memory_order_release);
  c.seq.store(odd + 1, std::memory_order_release);
  return odd + 1;
}

bool PollControl(v1::SlotHeader& slot, uint64_t* seen_seq, ControlRequest* out) noexcept {
  v1::ControlBlock& c = slot.control;
  const uint64_t s1 = c.seq.load(std::memory_order_acquire);
  if (s1 == *seen_seq || (s1 & 1) != 0) return false;
  ControlRequest r;
  r.paused = (c.flags.load(std::memory_order_acquire) & v1::kControlPaused) != 0;
  r.sample_every = c.sample_every.load(std::memory_order_acquire);
  r.trace_first_step = c.trace_first_step.load(std::memory_order_acquire);
  r.trace_last_step = c.trace_last_step.load(std::memory_order_acquire);
  r.request_id = c.request_id.load(std::memory_order_acquire);
  r.selftest_stage = c.selftest_stage.load(std::memory_order_acquire);
  r.selftest_delay_us = c.selftest_delay_us.load(std::memory_order_acquire);
  r.selftest_first_step = c.selftest_first_step.load(std::memory_order_acquire);
  r.selftest_last_step = c.selftest_last_step.load(std::memory_order_acquire);
  if (c.seq.load(std::memory_order_relaxed) != s1) return false;
  *out = r;
  *seen_seq = s1;
  slot.control_applied_seq.store(s1, std::memory_order_release);
  return true;
}

void AnswerSelfTest(v1::SlotHeader& slot, int64_t first_step, v1::SelfTestState state) noexcept {
  // The sidecar reads the pair without a lock: the state is stored last, and a reader that
  // sees a state for an older first step simply waits for the next health report.
  slot.selftest_steps_done.store(0, std::memory_order_relaxed);
  slot.selftest_answered_first_step.store(first_step, std::memory_order_release);
  slot.selftest_state.store(state, std::memory_order_release);
}

void AnswerCapture(v1::SlotHeader& slot, int64_t first_step, v1::CaptureState state,
                   v1::CaptureFailure failure, uint64_t bytes) noexcept {
  // As AnswerSelfTest: the state goes last; "none" first, so that a reader never pairs the
  // new first step with the previous answer's state.
  slot.capture_state.store(v1::kCaptureNone, std::memory_order_release);
  slot.capture_answered_first_step.store(first_step, std::memory_order_release);
  slot.capture_failure.store(failure, std::memory_order_release);
  slot.capture_bytes.store(bytes, std::memory_order_release);
  slot.capture_state.store(state, std::memory_order_release);
}

namespace {
constexpr const char* kCaptureStateNames[] = {"none", "running", "done", "failed"};
constexpr const char* kCaptureFailureNames[] = {"", "busy", "start", "write", "callback", "missed"};
static_assert(std::size(kCaptureFailureNames) == v1::kCaptureFailureMax + 1);
}  // namespace

const char* CaptureStateName(uint32_t state) {
  return state < std::size(kCaptureStateNames) ? kCaptureStateNames[state] : "unknown";
}
const char* CaptureFailureName(uint32_t failure) {
  return failure < std::size(kCaptureFailureNames) ? kCaptureFailureNames[failure] : "unknown";
}
std::optional<v1::CaptureState> ParseCaptureState(std::string_view name) {
  for (uint32_t i = 1; i < std::size(kCaptureStateNames); ++i) {
    if (name == kCaptureStateNames[i]) return static_cast<v1::CaptureState>(i);
  }
  return std::nullopt;
}
std::optional<v1::CaptureFailure> ParseCaptureFailure(std::string_view name) {
  for (uint32_t i = 0; i < std::size(kCaptureFailureNames); ++i) {
    if (name == kCaptureFailureNames[i]) return static_cast<v1::CaptureFailure>(i);
  }
  return std::nullopt;
}

void CountSelfTestStep(v1::SlotHeader& slot) noexcept {
  slot.selftest_steps_done.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace stagefrontier::shm
