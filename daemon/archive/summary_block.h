// A summary block: many per-step frontier summaries (`v1::StepSummary`, what GetSteps serves)
// in one compact, exact unit, so that a coordinator can keep a long job's whole step history in
// memory. Each field becomes a column — step numbers as gaps, each stage's increments, leaders
// and margins as deltas over time, the exposed time and the excess as their difference from
// what the other fields imply — and the columns are compressed with zstd in two frames: the
// frontier (steps, flags, missing ranks, first excess stage, exposed time, per stage increment,
// leader, margin) and the detail beside it (per stage baseline, excess, mean and max over
// ranks). Decoding gives back the same summaries, byte for byte when serialized.
// Byte layout: docs/journal-format.md, "Summary blocks".
//
//   SummaryBlockStats stats;
//   absl::StatusOr<std::string> block = EncodeSummaryBlock(summaries, {.stage_count = 6}, &stats);
//   std::vector<v1::StepSummary> back;
//   absl::Status s = DecodeSummaryBlock(*block, &back);   // back == summaries
//
// Versioned (NCCL-plugin style): version 1 is frozen; a reader refuses a version it does not
// know with a message saying so.
#ifndef STAGEFRONTIER_DAEMON_ARCHIVE_SUMMARY_BLOCK_H_
#define STAGEFRONTIER_DAEMON_ARCHIVE_SUMMARY_BLOCK_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

inline constexpr uint8_t kSummaryBlockVersion = 1;
// Bounds a reader enforces before it allocates.
inline constexpr uint64_t kMaxSummaryBlockSteps = 1 << 16;
inline constexpr uint64_t kMaxSummaryBlockRawBytes = 16ULL << 20;  // each frame, uncompressed

struct SummaryBlockOptions {
  uint32_t stage_count = 0;  // the job's stages (1 .. shm::v1::kMaxStages)
  int zstd_level = 3;        // 1 (fast) .. 19 (small)
};

// What went into a block.
struct SummaryBlockStats {
  uint64_t steps = 0;
  uint64_t whole_steps = 0;      // summaries that travel whole (another stage count, odd fields)
  uint64_t input_bytes = 0;      // the summaries' serialized sizes, summed
  uint64_t frontier_bytes = 0;   // the frontier frame with its sizes (version byte included)
  uint64_t detail_bytes = 0;     // the detail frame with its size
  uint64_t block_bytes = 0;      // the whole block
};

// Encodes `summaries`, in order, into one block. A summary goes into the columns only when
// rebuilding it from them gives its exact serialized bytes (`stage_count` stages, no unknown
// fields); any other travels whole. Fails with InvalidArgument for no summaries or more than
// kMaxSummaryBlockSteps, or a stage count outside 1..kMaxStages; with Internal when zstd fails.
[[nodiscard]] absl::StatusOr<std::string> EncodeSummaryBlock(
    std::span<const v1::StepSummary> summaries, const SummaryBlockOptions& options,
    SummaryBlockStats* stats = nullptr);

// Decodes `block`, appending its summaries in order to `out` (nothing is appended on failure).
// Fails with FailedPrecondition for a version this build does not know ("summary block version N
// is newer ...") and with InvalidArgument naming what is wrong for anything malformed. Never
// reads outside `block`.
[[nodiscard]] absl::Status DecodeSummaryBlock(absl::string_view block,
                                              std::vector<v1::StepSummary>* out);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ARCHIVE_SUMMARY_BLOCK_H_
