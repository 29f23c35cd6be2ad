// Accumulates one step of one rank in process memory: which stage ran for how long. No I/O,
// no allocation after construction, no clock of its own (the caller passes times), so every
// rule here is tested with exact numbers.
//
// Rules (docs/link-the-stub.md explains them to users):
//  * Time between Begin and the first stage, or between two stages, counts toward the stage
//    entered next, so the boundaries of a step that runs its stages once, in order, are the
//    real times at which each stage ended.
//  * A stage entered several times in a step (gradient accumulation) is summed; the record is
//    flagged kRecordStageReentered and its boundaries are "as if the stages ran back to back
//    in schema order".
//  * Mark(k) says "stage k ended now": it covers the time since the previous stage ended.
//  * Nested or overlapping stage scopes are flagged kRecordStagesOverlap.
//
//   StepRecorder rec(/*stage_count=*/3);
//   rec.Begin(t0); rec.Enter(0, t0); rec.Exit(0, t1); rec.Mark(1, t2); rec.Mark(2, t3);
//   int64_t b[4]; uint32_t flags = rec.Finish(t3, b);  // b = {t0, t1, t2, t3}
#ifndef STAGEFRONTIER_CLIENT_STEP_RECORDER_H_
#define STAGEFRONTIER_CLIENT_STEP_RECORDER_H_

#include <algorithm>
#include <cstdint>

#include "shm/segment_layout_v1.h"

namespace stagefrontier {

class StepRecorder {
 public:
  static constexpr uint32_t kMaxStages = shm::v1::kMaxStages;

  // stage_count in 1..kMaxStages (larger values are clamped).
  explicit StepRecorder(uint32_t stage_count) : stage_count_(std::min(stage_count, kMaxStages)) {}

  uint32_t stage_count() const { return stage_count_; }
  bool in_step() const { return in_step_; }
  // Calls that made no sense (a stage outside a step, an unknown stage, Exit without Enter).
  uint64_t misuse() const { return misuse_; }

  void Begin(int64_t t) noexcept {
    std::fill(acc_, acc_ + stage_count_, 0);
    entered_ = 0;
    open_ = 0;
    open_count_ = 0;
    flags_ = 0;
    start_ = t;
    last_exit_ = t;
    in_step_ = true;
  }

  // Enter, Exit and Mark return false for a call that made no sense (counted in misuse()).
  bool Enter(uint32_t k, int64_t t) noexcept {
    if (!in_step_ || k >= stage_count_ || (open_ & Bit(k)) != 0) {
      ++misuse_;
      return false;
    }
    if (open_count_ > 0) {
      flags_ |= shm::v1::kRecordStagesOverlap;
    } else if (t > last_exit_) {
      acc_[k] += t - last_exit_;
    }
    Touch(k);
    open_ |= Bit(k);
    ++open_count_;
    open_start_[k] = t;
    return true;
  }

  bool Exit(uint32_t k, int64_t t) noexcept {
    if (!in_step_ || k >= stage_count_ || (open_ & Bit(k)) == 0) {
      ++misuse_;
      return false;
    }
    acc_[k] += t - open_start_[k];
    open_ &= ~Bit(k);
    --open_count_;
    last_exit_ = std::max(last_exit_, t);
    return true;
  }

  bool Mark(uint32_t k, int64_t t) noexcept {
    if (!in_step_ || k >= stage_count_) {
      ++misuse_;
      return false;
    }
    if (t > last_exit_) acc_[k] += t - last_exit_;
    Touch(k);
    last_exit_ = std::max(last_exit_, t);
    return true;
  }

  // Ends the step at time t: closes stages left open at t, writes stage_count + 1 boundaries
  // (step start, then the end of each stage) and returns the record flags.
  uint32_t Finish(int64_t t, int64_t* boundaries) noexcept {
    for (uint32_t k = 0; k < stage_count_ && open_ != 0; ++k) {
      if ((open_ & Bit(k)) != 0) Exit(k, t);
    }
    boundaries[0] = start_;
    // Overlapping scopes count their shared time twice; never let a boundary pass the end.
    for (uint32_t k = 0; k < stage_count_; ++k) {
      boundaries[k + 1] = std::min(boundaries[k] + acc_[k], std::max(t, start_));
    }
    const uint32_t all = stage_count_ == 32 ? ~0U : (Bit(stage_count_) - 1);
    if (entered_ != all) flags_ |= shm::v1::kRecordStageMissing;
    in_step_ = false;
    return flags_;
  }

 private:
  static uint32_t Bit(uint32_t k) { return 1U << k; }
  void Touch(uint32_t k) {
    if ((entered_ & Bit(k)) != 0) flags_ |= shm::v1::kRecordStageReentered;
    entered_ |= Bit(k);
  }

  uint32_t stage_count_;
  bool in_step_ = false;
  uint32_t entered_ = 0;
  uint32_t open_ = 0;
  uint32_t open_count_ = 0;
  uint32_t flags_ = 0;
  int64_t start_ = 0;
  int64_t last_exit_ = 0;
  uint64_t misuse_ = 0;
  int64_t acc_[kMaxStages] = {};
  int64_t open_start_[kMaxStages] = {};
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_CLIENT_STEP_RECORDER_H_
