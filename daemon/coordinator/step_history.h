// The per-step frontier summaries a job keeps for GetSteps (and the web view's per-step chart):
// the newest steps as protobufs, older ones sealed into summary blocks of `block_steps` steps
// (daemon/archive/summary_block.h: exact, ~20-60 bytes per step instead of ~200 serialized,
// ~1 KB as objects), so a long job's history fits in little memory.
//
//   StepHistory history({.max_steps = 10'000, .stage_count = 6});
//   history.Add(std::move(summary));          // steps in increasing order
//   v1::GetStepsReply reply;
//   history.Copy(from, to, 1000, &reply);     // sets oldest_held_step, appends the steps
//
// Not thread-safe: the job's lock guards it.
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_STEP_HISTORY_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_STEP_HISTORY_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

struct StepHistoryOptions {
  // Steps kept: at least this many of the newest (when that many were added), and fewer than
  // this many plus `block_steps` (whole blocks are dropped, oldest first).
  int64_t max_steps = 10'000;
  uint32_t stage_count = 1;   // the job's stages
  int32_t block_steps = 256;  // steps sealed into one block (1 .. kMaxSummaryBlockSteps)
};

class StepHistory {
 public:
  explicit StepHistory(const StepHistoryOptions& options);

  // Adds the summary of the step after every step added so far.
  void Add(v1::StepSummary summary);

  // Sets out's oldest_held_step (-1 when empty) and appends the held summaries with
  // from <= step <= to, oldest first, at most `max` of them.
  void Copy(int64_t from, int64_t to, int32_t max, v1::GetStepsReply* out) const;

  // Copy in two halves, so that the decoding runs outside the job's lock: Take (cheap: shares
  // the blocks, copies the open summaries in range) under the lock, then Fill without it.
  struct Slice {
    int64_t from = 0, to = 0;
    int32_t max = 0;
    int64_t oldest = -1;
    std::vector<std::shared_ptr<const std::string>> blocks;
    std::vector<v1::StepSummary> open;
  };
  Slice Take(int64_t from, int64_t to, int32_t max) const;
  // Safe to call concurrently with anything (touches no state but a counter).
  void Fill(const Slice& slice, v1::GetStepsReply* out) const;

  int64_t steps() const { return held_; }
  // Bytes the summaries take: the sealed blocks' sizes plus the open steps' serialized sizes.
  uint64_t bytes() const { return block_bytes_ + open_bytes_; }
  uint64_t sealed_steps() const { return sealed_steps_; }
  uint64_t sealed_bytes() const { return block_bytes_; }
  // Summaries that could not be sealed (the encoder failed; they were dropped with their block),
  // and blocks that failed to decode in Copy (skipped). Both zero unless there is a bug.
  uint64_t seal_failures() const { return seal_failures_; }
  uint64_t decode_failures() const { return decode_failures_.load(std::memory_order_relaxed); }

 private:
  struct Block {
    int64_t first_step = 0;
    int64_t last_step = 0;
    int64_t count = 0;
    std::shared_ptr<const std::string> bytes;
  };
  void Seal();
  void Evict();

  StepHistoryOptions options_;
  std::deque<Block> blocks_;
  std::vector<v1::StepSummary> open_;
  int64_t held_ = 0;
  uint64_t block_bytes_ = 0;
  uint64_t open_bytes_ = 0;
  uint64_t sealed_steps_ = 0;
  uint64_t seal_failures_ = 0;
  mutable std::atomic<uint64_t> decode_failures_{0};
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_STEP_HISTORY_H_
