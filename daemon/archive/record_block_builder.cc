#include "daemon/archive/record_block_builder.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace stagefrontier {
namespace {

constexpr uint64_t kBlockInputBytes = 8 << 20;

}  // namespace

absl::Status RecordBlockBuilder::Add(const v1::JournalRecord& record, Emit emit) {
  pending_.push_back(record);
  return Added(emit);
}

absl::Status RecordBlockBuilder::Add(v1::JournalRecord&& record, Emit emit) {
  pending_.push_back(std::move(record));
  return Added(emit);
}

absl::Status RecordBlockBuilder::Added(Emit emit) {
  const v1::JournalRecord& record = pending_.back();
  pending_bytes_ += record.ByteSizeLong();
  if (record.has_closed()) ++pending_closed_;
  if (pending_closed_ >= block_steps_ || pending_bytes_ >= kBlockInputBytes) return Finish(emit);
  return absl::OkStatus();
}

absl::Status RecordBlockBuilder::Finish(Emit emit) {
  if (pending_.empty()) return absl::OkStatus();
  RecordBlockStats stats;
  absl::StatusOr<std::string> block = EncodeRecordBlock(pending_, options_, &stats);
  if (!block.ok()) return block.status();
  if (verify_every_ > 0 && options_.duration_unit_ns == 1 && blocks_ % verify_every_ == 0) {
    if (absl::Status s = Verify(*block); !s.ok()) return s;
    ++verified_;
  }
  v1::JournalRecord out;
  out.set_block(*std::move(block));
  emit(std::move(out));
  ++blocks_;
  totals_.records += stats.records;
  totals_.whole_records += stats.whole_records;
  totals_.rank_steps += stats.rank_steps;
  totals_.rank_stage_steps += stats.rank_stage_steps;
  totals_.input_bytes += stats.input_bytes;
  totals_.column_bytes += stats.column_bytes;
  totals_.block_bytes += stats.block_bytes;
  pending_.clear();
  pending_closed_ = pending_bytes_ = 0;
  return absl::OkStatus();
}

absl::Status RecordBlockBuilder::Verify(const std::string& block) const {
  size_t i = 0;
  bool same = true;
  std::string decoded_bytes, pending_bytes;
  const absl::Status decoded = DecodeRecordBlock(block, [&](const v1::JournalRecord& r) {
    if (same && i < pending_.size()) {
      r.SerializeToString(&decoded_bytes);
      pending_[i].SerializeToString(&pending_bytes);
      same = decoded_bytes == pending_bytes;
    }
    ++i;
    return absl::OkStatus();
  });
  if (!decoded.ok() || !same || i != pending_.size()) {
    return absl::InternalError(absl::StrCat("a record block of ", pending_.size(),
                                            " records did not decode to them: not used"));
  }
  return absl::OkStatus();
}

}  // namespace stagefrontier
