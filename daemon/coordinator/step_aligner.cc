#include "daemon/coordinator/step_aligner.h"

#include <algorithm>
#include <utility>

#include "shm/segment_layout_v1.h"

namespace stagefrontier {

StepAligner::StepAligner(int32_t world_size, uint32_t stage_count, AlignerOptions options)
    : world_size_(world_size),
      stage_count_(stage_count),
      options_(options),
      state_(static_cast<size_t>(world_size), RankState::kUnseen),
      last_accepted_(static_cast<size_t>(world_size), -1),
      claimed_(static_cast<size_t>(world_size), -1) {}

int64_t StepAligner::CachedReference() {
  if (!reference_valid_) {
    reference_ = Reference();
    reference_valid_ = true;
    ++reference_computations_;
  }
  return reference_;
}

void StepAligner::RaiseClaim(int32_t rank, int64_t step) {
  int64_t& claim = claimed_[rank];
  if (step <= claim) return;
  if (claim <= reference_) reference_valid_ = false;  // from the lower half: it may move
  claim = step;
}

int64_t StepAligner::Reference() {
  std::vector<int64_t> seen;
  for (int64_t c : claimed_) {
    if (c >= 0) seen.push_back(c);
  }
  if (seen.empty()) return last_closed_;
  // The lower median: with two ranks, one of them alone cannot move it.
  auto mid = seen.begin() + static_cast<std::ptrdiff_t>((seen.size() - 1) / 2);
  std::nth_element(seen.begin(), mid, seen.end());
  return std::max(last_closed_, *mid);
}

AlignOutcome StepAligner::Add(int32_t rank, int64_t step, const int64_t* durations_ns,
                              uint32_t flags, int64_t now_ns, std::vector<ProbeSpan> probe) {
  if (step <= last_closed_) {
    // Records of one rank arrive in step order: at or before its newest accepted step, a
    // re-send; otherwise its step closed without it.
    return step <= last_accepted_[rank] ? AlignOutcome::kDuplicate : AlignOutcome::kLate;
  }
  auto it = pending_.find(step);
  if (it != pending_.end() && Has(it->second, rank)) return AlignOutcome::kDuplicate;
  RaiseClaim(rank, step);
  // The median is needed only for a record that looks far ahead of the last closed step.
  if (step - std::max<int64_t>(last_closed_, 0) > options_.max_step_lead &&
      step - CachedReference() > options_.max_step_lead) {
    return AlignOutcome::kFarAhead;
  }
  if (it == pending_.end() &&
      static_cast<int64_t>(pending_.size()) >= 2 * options_.max_pending_steps + 64) {
    return AlignOutcome::kFarAhead;  // more open steps than a job is allowed to hold
  }
  if (it == pending_.end()) {
    Pending fresh;
    if (!spares_.empty()) {
      fresh = std::move(spares_.back());
      spares_.pop_back();
    }
    it = pending_.try_emplace(step, std::move(fresh)).first;
    it->second.first_arrival_ns = now_ns;
    it->second.has.assign((static_cast<size_t>(world_size_) + 63) / 64, 0);
  }
  Pending& p = it->second;
  p.last_arrival_ns = now_ns;
  p.has[rank >> 6] |= uint64_t{1} << (rank & 63);
  ++p.present;
  p.ranks.push_back(rank);
  p.durations.insert(p.durations.end(), durations_ns, durations_ns + stage_count_);
  p.probe.push_back(std::move(probe));
  if ((flags & shm::v1::kRecordTraceCaptured) != 0) p.captured = true;
  last_accepted_[rank] = std::max(last_accepted_[rank], step);
  newest_ = std::max(newest_, step);
  if (state_[rank] == RankState::kMissing) --missing_;
  state_[rank] = RankState::kReporting;
  return AlignOutcome::kAccepted;
}

bool StepAligner::Complete(const Pending& p) const {
  if (p.present == world_size_) return true;
  if (p.present < world_size_ - missing_) return false;
  for (int32_t r = 0; r < world_size_; ++r) {
    if (!Has(p, r) && state_[r] != RankState::kMissing) return false;
  }
  return true;
}

std::optional<int64_t> StepAligner::NextClosable(int64_t now_ns) const {
  if (pending_.empty()) return std::nullopt;
  const auto& [step, p] = *pending_.begin();
  if (Complete(p) || static_cast<int64_t>(pending_.size()) > options_.max_pending_steps) {
    return step;
  }
  const int64_t since_first = now_ns - p.first_arrival_ns;
  const bool quiet = now_ns - p.last_arrival_ns >= options_.deadline_ns / kQuietFraction;
  if ((since_first >= options_.deadline_ns && quiet) || since_first >= 2 * options_.deadline_ns) {
    return step;
  }
  return std::nullopt;
}

void StepAligner::RecomputeNewest(int32_t rank) {
  int64_t newest = -1;
  for (const auto& [step, p] : pending_) {
    if (Has(p, rank)) newest = step;
  }
  // Without a pending step of its own, the rank is at most where the job closed.
  last_accepted_[rank] = newest >= 0 ? newest : std::min(last_accepted_[rank], last_closed_);
  claimed_[rank] = last_accepted_[rank];
  reference_valid_ = false;
}

std::vector<int64_t> StepAligner::Orphans() const {
  std::vector<int64_t> out;
  if (pending_.size() < 2) return out;
  const int64_t oldest_arrival = pending_.begin()->second.first_arrival_ns;
  for (auto it = std::next(pending_.begin()); it != pending_.end(); ++it) {
    if (it->second.first_arrival_ns + options_.deadline_ns < oldest_arrival) {
      out.push_back(it->first);
    }
  }
  return out;
}

int64_t StepAligner::Drop(int64_t step) {
  auto it = pending_.find(step);
  if (it == pending_.end()) return 0;
  std::vector<int32_t> ranks = std::move(it->second.ranks);
  pending_.erase(it);
  for (int32_t r : ranks) RecomputeNewest(r);
  newest_ = last_closed_;
  for (int64_t s : last_accepted_) newest_ = std::max(newest_, s);
  return static_cast<int64_t>(ranks.size());
}

void StepAligner::Recycle(StepInput input) {
  if (spare_inputs_.size() < kSpareInputs) spare_inputs_.push_back(std::move(input));
}

StepInput StepAligner::Close(int64_t step) {
  auto it = pending_.find(step);
  if (it == pending_.end()) return StepInput{.step = step, .ranks = {}, .captured = false};
  StepInput in;
  if (!spare_inputs_.empty()) {  // every field is set below; its vectors keep their capacity
    in = std::move(spare_inputs_.back());
    spare_inputs_.pop_back();
  }
  in.step = step;
  Pending p = std::move(it->second);
  pending_.erase(it);
  last_closed_ = step;
  reference_valid_ = false;
  in.captured = p.captured;
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
      if (!Has(p, r) && state_[r] != RankState::kMissing && last_accepted_[r] < step) {
        state_[r] = RankState::kMissing;
        ++missing_;
      }
    }
  }
  // Emptied, its capacity kept for the next step (only its first_arrival_ns, present and
  // captured are not containers: reset here, so a reused Pending starts as a fresh one).
  p.ranks.clear();
  p.durations.clear();
  p.probe.clear();
  p.first_arrival_ns = 0;
  p.last_arrival_ns = 0;
  p.present = 0;
  p.captured = false;
  if (spares_.size() < kSpareSteps) spares_.push_back(std::move(p));
  return in;
}

}  // namespace stagefrontier
