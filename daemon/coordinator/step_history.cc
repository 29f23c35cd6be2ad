#include "daemon/coordinator/step_history.h"

#include <algorithm>
#include <utility>

#include "daemon/archive/summary_block.h"

namespace stagefrontier {

StepHistory::StepHistory(const StepHistoryOptions& options) : options_(options) {
  options_.block_steps =
      std::clamp<int32_t>(options_.block_steps, 1, static_cast<int32_t>(kMaxSummaryBlockSteps));
  options_.max_steps = std::max<int64_t>(options_.max_steps, 1);
}

void StepHistory::Add(v1::StepSummary summary) {
  open_bytes_ += summary.ByteSizeLong();
  open_.push_back(std::move(summary));
  ++held_;
  if (static_cast<int32_t>(open_.size()) >= options_.block_steps) Seal();
  Evict();
}

void StepHistory::Seal() {
  absl::StatusOr<std::string> block =
      EncodeSummaryBlock(open_, {.stage_count = options_.stage_count});
  if (!block.ok()) {
    // Cannot happen with the coordinator's own summaries; never fatal to the job: counted.
    seal_failures_ += open_.size();
    held_ -= static_cast<int64_t>(open_.size());
  } else {
    block_bytes_ += block->size();
    sealed_steps_ += open_.size();
    blocks_.push_back(Block{open_.front().step(), open_.back().step(),
                            static_cast<int64_t>(open_.size()),
                            std::make_shared<const std::string>(*std::move(block))});
  }
  open_.clear();
  open_bytes_ = 0;
}

void StepHistory::Evict() {
  while (!blocks_.empty() && held_ - blocks_.front().count >= options_.max_steps) {
    held_ -= blocks_.front().count;
    sealed_steps_ -= static_cast<uint64_t>(blocks_.front().count);
    block_bytes_ -= blocks_.front().bytes->size();
    blocks_.pop_front();
  }
}

void StepHistory::Copy(int64_t from, int64_t to, int32_t max, v1::GetStepsReply* out) const {
  Fill(Take(from, to, max), out);
}

StepHistory::Slice StepHistory::Take(int64_t from, int64_t to, int32_t max) const {
  Slice slice;
  slice.from = from;
  slice.to = to;
  slice.max = max;
  slice.oldest = !blocks_.empty() ? blocks_.front().first_step
                 : !open_.empty() ? open_.front().step()
                                  : -1;
  auto first = std::lower_bound(blocks_.begin(), blocks_.end(), from,
                                [](const Block& b, int64_t v) { return b.last_step < v; });
  // At least the steps in range the blocks taken hold: a block that begins before `from` may
  // hold none of them; one that begins at or after it holds all of its steps up to `to`, and
  // any block after one that ends past `to` is out of the range anyway.
  int64_t taken = 0;
  for (auto it = first; it != blocks_.end() && it->first_step <= to && taken < max; ++it) {
    slice.blocks.push_back(it->bytes);
    if (it->first_step >= from) taken += it->count;
  }
  auto open = std::lower_bound(open_.begin(), open_.end(), from,
                               [](const v1::StepSummary& s, int64_t v) { return s.step() < v; });
  for (; open != open_.end() && open->step() <= to && taken < max; ++open, ++taken) {
    slice.open.push_back(*open);
  }
  return slice;
}

void StepHistory::Fill(const Slice& slice, v1::GetStepsReply* out) const {
  out->set_oldest_held_step(slice.oldest);
  auto take = [&](const v1::StepSummary& s) {
    if (s.step() < slice.from || s.step() > slice.to) return true;
    if (out->steps_size() >= slice.max) return false;
    *out->add_steps() = s;
    return true;
  };
  std::vector<v1::StepSummary> decoded;
  for (const std::shared_ptr<const std::string>& block : slice.blocks) {
    decoded.clear();
    if (!DecodeSummaryBlock(*block, &decoded).ok()) {
      // Cannot happen with the blocks Seal wrote; counted, never fatal.
      decode_failures_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    for (const v1::StepSummary& s : decoded) {
      if (!take(s)) return;
    }
  }
  for (const v1::StepSummary& s : slice.open) {
    if (!take(s)) return;
  }
}

}  // namespace stagefrontier
