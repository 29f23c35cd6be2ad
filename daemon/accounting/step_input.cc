#include "daemon/accounting/step_input.h"

#include "absl/strings/str_cat.h"
#include "shm/record_limits.h"

namespace stagefrontier {

absl::Status ValidateRankStep(const StageSchema& schema, int32_t world_size,
                              const RankStep& record) {
  if (record.rank < 0 || record.rank >= world_size) {
    return absl::OutOfRangeError(
        absl::StrCat("rank ", record.rank, " is outside [0, ", world_size, ")"));
  }
  const size_t want = schema.size() + 1;
  if (record.boundaries_ns.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", record.rank, " reported ",
                                                   record.boundaries_ns.size(),
                                                   " boundaries; the schema needs ", want));
  }
  for (size_t k = 1; k < want; ++k) {
    const int64_t a = record.boundaries_ns[k - 1];
    const int64_t b = record.boundaries_ns[k];
    // Subtract in unsigned arithmetic: a hostile pair of values must not overflow.
    if (b < a) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", record.rank, ": stage \"", schema.stage(k - 1).name,
          "\" has a negative duration (",
          static_cast<int64_t>(static_cast<uint64_t>(b) - static_cast<uint64_t>(a)), " ns)"));
    }
    if (static_cast<uint64_t>(b) - static_cast<uint64_t>(a) >
        static_cast<uint64_t>(INT64_MAX / 4)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", record.rank, ": stage \"", schema.stage(k - 1).name, "\" lasts too long"));
    }
  }
  if (static_cast<uint64_t>(record.boundaries_ns.back()) -
          static_cast<uint64_t>(record.boundaries_ns.front()) >
      static_cast<uint64_t>(INT64_MAX / 4)) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", record.rank, ": step lasts too long"));
  }
  for (const ProbeSpan& span : record.probe) {
    if (span.stage >= schema.size()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", record.rank,
                                                     ": probe span names stage ", span.stage,
                                                     " but the schema has ", schema.size()));
    }
    // Spans may leave their stage (that is what bracketing validation reports), but not by
    // more than a day, so that later arithmetic cannot overflow.
    constexpr int64_t kDay = shm::kMaxStageNs;
    const int64_t lo = record.boundaries_ns.front();
    const int64_t hi = record.boundaries_ns.back();
    if (span.exit_ns < span.enter_ns || span.enter_ns < lo - kDay || span.exit_ns > hi + kDay) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", record.rank, ": probe span [", span.enter_ns, ", ", span.exit_ns,
          "] in stage \"", schema.stage(span.stage).name,
          "\" is reversed or more than a day away from its step [", lo, ", ", hi, "]"));
    }
  }
  return absl::OkStatus();
}

uint32_t StageAt(const std::vector<int64_t>& boundaries, int64_t t) {
  uint32_t k = 0;
  while (k + 2 < boundaries.size() && t > boundaries[k + 1]) ++k;
  return k;
}

}  // namespace stagefrontier
