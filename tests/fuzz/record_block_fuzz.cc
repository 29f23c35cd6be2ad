// Fuzz target: arbitrary bytes as a journal record block (daemon/archive/record_block.h,
// docs/journal-format.md "Record blocks"). Decoding must fail with a status or give records;
// records it gives, encoded again with the block's stage count and unit, must decode to the
// same records (byte for byte serialized). Never a crash, never a read outside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/archive/record_block.h"

namespace {

std::vector<std::string> Decoded(const std::string& block, bool* ok) {
  std::vector<std::string> out;
  *ok = stagefrontier::DecodeRecordBlock(block, [&](const stagefrontier::v1::JournalRecord& r) {
          out.push_back(r.SerializeAsString());
          return absl::OkStatus();
        }).ok();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::vector<stagefrontier::v1::JournalRecord> records;
  stagefrontier::RecordBlockInfo info;
  const absl::Status s = stagefrontier::DecodeRecordBlock(
      bytes,
      [&](const stagefrontier::v1::JournalRecord& r) {
        records.push_back(r);
        return absl::OkStatus();
      },
      &info);
  if (!s.ok()) {
    if (!records.empty()) std::abort();  // nothing reaches the sink from a bad block
    return 0;
  }
  if (info.records != records.size()) std::abort();
  absl::StatusOr<std::string> again =
      stagefrontier::EncodeRecordBlock(records, {.stage_count = info.stage_count,
                                                 .zstd_level = 1,
                                                 .duration_unit_ns = info.duration_unit_ns});
  if (!again.ok()) std::abort();
  bool ok = false;
  const std::vector<std::string> back = Decoded(*again, &ok);
  if (!ok || back.size() != records.size()) std::abort();
  for (size_t i = 0; i < back.size(); ++i) {
    if (back[i] != records[i].SerializeAsString()) std::abort();
  }
  return 0;
}
