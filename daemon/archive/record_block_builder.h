// Groups journal records, in order, into record blocks (record_block.h): a block ends after
// `block_steps` closed steps (a verdict window) or about 8 MiB of records. Shared by the
// offline compaction (daemon/journal/journal_compaction.h) and the coordinator's own
// (journal_compactor.h).
//
//   RecordBlockBuilder builder({.stage_count = 6}, /*block_steps=*/100);
//   for (const v1::JournalRecord& r : records) {
//     absl::Status s = builder.Add(r, [&](v1::JournalRecord block) { out.push_back(block); });
//   }
//   absl::Status s = builder.Finish([&](v1::JournalRecord block) { out.push_back(block); });
#ifndef STAGEFRONTIER_DAEMON_ARCHIVE_RECORD_BLOCK_BUILDER_H_
#define STAGEFRONTIER_DAEMON_ARCHIVE_RECORD_BLOCK_BUILDER_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "daemon/archive/record_block.h"

namespace stagefrontier {

class RecordBlockBuilder {
 public:
  using Emit = absl::FunctionRef<void(v1::JournalRecord)>;

  // With `verify_every` N > 0, the first block and every Nth after it is decoded right after
  // it is built and compared with its records (serialized bytes; exact blocks only): a block
  // that would not give them back is an error. 0 checks none.
  RecordBlockBuilder(const RecordBlockOptions& options, uint32_t block_steps,
                     uint32_t verify_every = 0)
      : options_(options), block_steps_(block_steps), verify_every_(verify_every) {}

  // Adds `record` (never itself a block); passes each block it completes to `emit` (a record
  // whose body is the block). Fails as EncodeRecordBlock, or with Internal when verification
  // fails.
  [[nodiscard]] absl::Status Add(const v1::JournalRecord& record, Emit emit);
  // The same, without a copy of the record (the live compactor's loop).
  [[nodiscard]] absl::Status Add(v1::JournalRecord&& record, Emit emit);
  // Passes what is pending, if anything, as a last block.
  [[nodiscard]] absl::Status Finish(Emit emit);

  uint64_t blocks() const { return blocks_; }
  uint64_t verified_blocks() const { return verified_; }
  const RecordBlockStats& totals() const { return totals_; }

 private:
  RecordBlockOptions options_;
  uint32_t block_steps_;
  uint32_t verify_every_;
  std::vector<v1::JournalRecord> pending_;
  uint64_t pending_closed_ = 0;
  uint64_t pending_bytes_ = 0;
  uint64_t blocks_ = 0;
  uint64_t verified_ = 0;
  RecordBlockStats totals_;

  // Counts the record just added to pending_; ends the block when it is due.
  absl::Status Added(Emit emit);
  // Internal unless `block` decodes to pending_, record by record.
  absl::Status Verify(const std::string& block) const;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ARCHIVE_RECORD_BLOCK_BUILDER_H_
