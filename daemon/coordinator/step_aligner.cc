#include "daemon/coordinator/step_aligner.h"

#include <utility>

namespace stagefrontier {

StepAligner::StepAligner(int32_t world_size, uint32_t stage_count, AlignerOptions options)
    : world_size_(world_size),
      stage_count_(stage_count),
      options_(options),
      state_(static_cast<size_t>(world_size), RankState::kUnseen),
      last_accepted_(static_cast<size_t>(world_size), -1) {}

AlignOutcome StepAligner::Add(int32_t rank, int64_t step, const int64_t* durations_ns,
                              uint32_t flags, int64_t now_ns, std::vector<ProbeSpan> probe) {
  (void)flags;
  // Records of one rank arrive in step order, so anything at or before its newest accepted
  // step is a re-send.
  if (step <= last_accepted_[rank]) return AlignOutcome::kDuplicate;
  if (step <= last_closed_) return AlignOutcome::kLate;
  auto [it, inserted] = pending_.try_emplace(step);
  Pending& p = it->second;
  if (inserted) {
    p.first_arrival_ns = now_ns;
    p.has.assign(static_cast<size_t>(world_size_), 0);
  }
  if (p.has[rank]) return AlignOutcome::kDuplicate;
  p.has[rank] = 1;
  ++p.present;
  p.ranks.push_back(rank);
  p.durations.insert(p.durations.end(), durations_ns, durations_ns + stage_count_);
  p.probe.push_back(std::move(probe));
  last_accepted_[rank] = step;
  if (state_[rank] == RankState::kMissing) --missing_;
  state_[rank] = RankState::kReporting;
  return AlignOutcome::kAccepted;
}

bool StepAligner::Complete(const Pending& p) const {
  if (p.present == world_size_) return true;
  if (p.present < world_size_ - missing_) return false;
  for (int32_t r = 0; r < world_size_; ++r) {
    if (!p.has[r] && state_[r] != RankState::kMissing) return false;
  }
  return true;
}

std::optional<int64_t> StepAligner::NextClosable(int64_t now_ns) const {
  if (pending_.empty()) return std::nullopt;
  const auto& [step, p] = *pending_.begin();
  if (Complete(p) || now_ns - p.first_arrival_ns >= options_.deadline_ns ||
      static_cast<int64_t>(pending_.size()) > options_.max_pending_steps) {
    return step;
  }
  return std::nullopt;
}

StepInput StepAligner::Close(int64_t step) {
  StepInput in;
  in.step = step;
  auto it = pending_.find(step);
  if (it == pending_.end()) return in;
  Pending p = std::move(it->second);
  pending_.erase(it);
  last_closed_ = step;
  in.ranks.resize(p.ranks.size());
  for (size_t i = 0; i < p.ranks.size(); ++i) {
    RankStep& rs = in.ranks[i];
    rs.rank = p.ranks[i];
    rs.boundaries_ns.resize(stage_count_ + 1);
    int64_t t = 0;
    rs.boundaries_ns[0] = 0;
    for (uint32_t k = 0; k < stage_count_; ++k) {
      t += p.durations[i * stage_count_ + k];
      rs.boundaries_ns[k + 1] = t;
    }
    rs.probe = std::move(p.probe[i]);
    for (ProbeSpan& span : rs.probe) span.stage = StageAt(rs.boundaries_ns, span.call_ns);
  }
  if (p.present < world_size_) {
    for (int32_t r = 0; r < world_size_; ++r) {
      // A rank that already reported a later step is behind, not gone.
      if (!p.has[r] && state_[r] != RankState::kMissing && last_accepted_[r] < step) {
        state_[r] = RankState::kMissing;
        ++missing_;
      }
    }
  }
  return in;
}

}  // namespace stagefrontier
