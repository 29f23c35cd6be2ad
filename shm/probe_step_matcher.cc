#include "shm/probe_step_matcher.h"

namespace stagefrontier::shm {

void ProbeStepMatcher::Pull(ProbeRingReader& reader, uint32_t local_rank) {
  if (local_rank >= slots_.size()) return;
  Slot& s = slots_[local_rank];
  reader.Drain(local_rank, [&s](const ProbeInterval& p) {
    if (s.waiting.size() < kMaxWaiting) {
      s.waiting.push_back(p);
    } else {
      ++s.unmatched;
    }
  });
}

size_t ProbeStepMatcher::Match(uint32_t local_rank, int64_t step_start_ns, int64_t step_end_ns,
                               const std::function<void(const ProbeInterval&)>& fn) {
  if (local_rank >= slots_.size()) return 0;
  Slot& s = slots_[local_rank];
  while (!s.waiting.empty() && s.waiting.front().call_ns < step_start_ns) {
    s.waiting.pop_front();
    ++s.unmatched;
  }
  size_t n = 0;
  while (!s.waiting.empty() && s.waiting.front().call_ns <= step_end_ns) {
    fn(s.waiting.front());
    s.waiting.pop_front();
    ++s.matched;
    ++n;
  }
  return n;
}

}  // namespace stagefrontier::shm
