// Pairs a slot's probe intervals with the steps they belong to: an interval belongs to the
// step during which its collective was called (step start <= call <= the stub's end of the
// step). Intervals arrive in call order from the probe ring and steps in step order from the
// step ring, so a queue per slot suffices; an interval called before the step being matched
// belongs to no step that will come (between steps, or its step was never read) and is
// counted unmatched. Used by the sidecar and by `stagefrontier segment --drain`.
//
//   ProbeStepMatcher matcher(view);
//   matcher.Pull(probe_reader, local_rank);                     // take what the ring holds
//   matcher.Match(local_rank, b0, end_ns, [](const ProbeInterval& p) { Attach(p); });
#ifndef STAGEFRONTIER_SHM_PROBE_STEP_MATCHER_H_
#define STAGEFRONTIER_SHM_PROBE_STEP_MATCHER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "shm/probe_ring_reader.h"

namespace stagefrontier::shm {

class ProbeStepMatcher {
 public:
  // Intervals kept waiting per slot at most; more are counted unmatched.
  static constexpr size_t kMaxWaiting = 65536;

  explicit ProbeStepMatcher(uint32_t slot_count) : slots_(slot_count) {}

  // Moves every interval slot `local_rank`'s probe ring holds into its queue.
  void Pull(ProbeRingReader& reader, uint32_t local_rank);
  // Calls `fn` for each queued interval called in [step_start_ns, step_end_ns], in call order,
  // and forgets it. Returns how many.
  size_t Match(uint32_t local_rank, int64_t step_start_ns, int64_t step_end_ns,
               const std::function<void(const ProbeInterval&)>& fn);

  uint64_t matched(uint32_t local_rank) const { return slots_[local_rank].matched; }
  uint64_t unmatched(uint32_t local_rank) const { return slots_[local_rank].unmatched; }

 private:
  struct Slot {
    std::deque<ProbeInterval> waiting;
    uint64_t matched = 0;
    uint64_t unmatched = 0;
  };
  std::vector<Slot> slots_;
};

}  // namespace stagefrontier::shm

#endif  // STAGEFRONTIER_SHM_PROBE_STEP_MATCHER_H_
