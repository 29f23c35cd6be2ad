// Fuzz target: arbitrary bytes as a summary block (daemon/archive/summary_block.h,
// docs/journal-format.md "Summary blocks"). Decoding must fail with a status and append nothing,
// or give summaries; summaries it gives, encoded again, must decode to the same summaries (byte
// for byte serialized). Never a crash, never a read outside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/archive/summary_block.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::vector<stagefrontier::v1::StepSummary> out;
  if (!stagefrontier::DecodeSummaryBlock(bytes, &out).ok()) {
    if (!out.empty()) std::abort();  // nothing is appended from a bad block
    return 0;
  }
  if (out.empty()) std::abort();
  // The stage count is the first summary's when it is in the columns; any count re-encodes.
  const uint32_t stages = out[0].stages_size() > 0 ? static_cast<uint32_t>(out[0].stages_size()) : 1;
  absl::StatusOr<std::string> again =
      stagefrontier::EncodeSummaryBlock(out, {.stage_count = stages > 32 ? 1 : stages,  // 32: kMaxStages
                                              .zstd_level = 1});
  if (!again.ok()) std::abort();
  std::vector<stagefrontier::v1::StepSummary> back;
  if (!stagefrontier::DecodeSummaryBlock(*again, &back).ok() || back.size() != out.size()) {
    std::abort();
  }
  for (size_t i = 0; i < back.size(); ++i) {
    if (back[i].SerializeAsString() != out[i].SerializeAsString()) std::abort();
  }
  return 0;
}
