// The compact per-rank step vector carried by RankSteps.packed (proto/stagefrontier/v1/
// ingest.proto) and stored in the coordinator's journal. Per step: zigzag varint of the step
// number minus the previous one (the first: minus base_step), one varint duration per stage
// in nanoseconds, one varint of record flags. Byte-level description: docs/proto.md.
//
//   PackedStepsEncoder enc(/*stage_count=*/5);
//   enc.Add(step, durations_ns, flags);                // durations_ns: 5 values
//   msg.set_base_step(enc.base_step()); msg.set_count(enc.count()); msg.set_packed(enc.bytes());
//
//   absl::Status s = DecodePackedSteps(msg.packed(), msg.count(), msg.base_step(), 5,
//       [](int64_t step, const int64_t* durations, uint32_t flags) { ... });
#ifndef STAGEFRONTIER_DAEMON_WIRE_PACKED_STEPS_H_
#define STAGEFRONTIER_DAEMON_WIRE_PACKED_STEPS_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace stagefrontier::wire {

// Most steps in one RankSteps message.
inline constexpr uint32_t kMaxPackedCount = 1 << 16;

class PackedStepsEncoder {
 public:
  explicit PackedStepsEncoder(uint32_t stage_count) : stage_count_(stage_count) {}

  // Appends one step; `durations_ns` holds stage_count non-negative values. Steps must be
  // added in increasing order.
  void Add(int64_t step, const int64_t* durations_ns, uint32_t flags);
  void Clear();

  int64_t base_step() const { return base_step_; }
  uint32_t count() const { return count_; }
  const std::string& bytes() const { return bytes_; }
  uint32_t stage_count() const { return stage_count_; }

 private:
  uint32_t stage_count_;
  int64_t base_step_ = 0;
  int64_t last_step_ = 0;
  uint32_t count_ = 0;
  std::string bytes_;
};

// Decodes `count` steps of `stage_count` stages, calling `sink` for each in order. Fails with
// InvalidArgument naming the step index and what is wrong (truncated varint, duration out of
// range, step numbers not increasing, negative step, trailing bytes, count above
// kMaxPackedCount, no stages); `sink` may have been called for the steps before the error.
[[nodiscard]] absl::Status DecodePackedSteps(
    absl::string_view bytes, uint32_t count, int64_t base_step, uint32_t stage_count,
    absl::FunctionRef<void(int64_t step, const int64_t* durations_ns, uint32_t flags)> sink);

}  // namespace stagefrontier::wire

#endif  // STAGEFRONTIER_DAEMON_WIRE_PACKED_STEPS_H_
