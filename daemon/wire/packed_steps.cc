#include "daemon/wire/packed_steps.h"

#include "absl/strings/str_cat.h"
#include "daemon/wire/varint.h"
#include "shm/record_limits.h"
#include "shm/segment_layout_v1.h"

namespace stagefrontier::wire {

void PackedStepsEncoder::Add(int64_t step, const int64_t* durations_ns, uint32_t flags) {
  if (count_ == 0) {
    base_step_ = step;
    last_step_ = step;
  }
  // Written in place, one resize per step (the live journal compactor re-encodes every step it
  // compacts).
  const size_t at = bytes_.size();
  bytes_.resize(at + (stage_count_ + 2) * kMaxVarintBytes);
  char* const begin = bytes_.data() + at;
  char* p = WriteVarint(begin, ZigZag(step - last_step_));
  last_step_ = step;
  for (uint32_t k = 0; k < stage_count_; ++k) {
    p = WriteVarint(p, static_cast<uint64_t>(durations_ns[k] < 0 ? 0 : durations_ns[k]));
  }
  p = WriteVarint(p, flags);
  bytes_.resize(at + static_cast<size_t>(p - begin));
  ++count_;
}

void PackedStepsEncoder::Clear() {
  bytes_.clear();
  count_ = 0;
  base_step_ = 0;
  last_step_ = 0;
}

absl::Status DecodePackedSteps(
    absl::string_view bytes, uint32_t count, int64_t base_step, uint32_t stage_count,
    absl::FunctionRef<void(int64_t step, const int64_t* durations_ns, uint32_t flags)> sink) {
  if (stage_count == 0 || stage_count > shm::v1::kMaxStages) {
    return absl::InvalidArgumentError(
        absl::StrCat("packed steps: schema has ", stage_count, " stages"));
  }
  if (count > kMaxPackedCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("packed steps: count ", count, " is above ", kMaxPackedCount));
  }
  if (!shm::ValidStepNumber(base_step)) {
    return absl::InvalidArgumentError(
        absl::StrCat("packed steps: base step ", base_step, " is outside [0, 2^40)"));
  }
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  int64_t step = base_step;
  int64_t durations[shm::v1::kMaxStages];
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t v = 0;
    if (!GetVarint(p, end, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("packed steps: step ", i, ": truncated step number"));
    }
    const int64_t delta = UnZigZag(v);
    if ((i == 0 && delta != 0) || (i > 0 && delta <= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "packed steps: step ", i, ": step delta ", delta,
          i == 0 ? " (the first step must equal base_step)" : " (steps must increase)"));
    }
    // step is within [0, 2^40) here, so only a delta that keeps it there can be added.
    if (delta > shm::kMaxStepNumber - step) {
      return absl::InvalidArgumentError(absl::StrCat("packed steps: step ", i, ": step delta ",
                                                     delta, " leads outside [0, 2^40)"));
    }
    step += delta;
    for (uint32_t k = 0; k < stage_count; ++k) {
      if (!GetVarint(p, end, &v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("packed steps: step ", i, ": truncated duration of stage ", k));
      }
      if (v > static_cast<uint64_t>(shm::kMaxStageNs)) {
        return absl::InvalidArgumentError(
            absl::StrCat("packed steps: step ", i, ": stage ", k, " lasts ", v, " ns, over a day"));
      }
      durations[k] = static_cast<int64_t>(v);
    }
    if (!GetVarint(p, end, &v) || v > 0xffffffffULL) {
      return absl::InvalidArgumentError(
          absl::StrCat("packed steps: step ", i, ": truncated or oversized flags"));
    }
    sink(step, durations, static_cast<uint32_t>(v));
  }
  if (p != end) {
    return absl::InvalidArgumentError(
        absl::StrCat("packed steps: ", end - p, " bytes after the last of ", count, " steps"));
  }
  return absl::OkStatus();
}

}  // namespace stagefrontier::wire
