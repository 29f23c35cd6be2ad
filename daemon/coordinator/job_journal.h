// The coordinator's durable record of one job: a record log (daemon/journal/record_log.h;
// docs/journal-format.md) whose first record is the job's declaration. Recovery of a damaged
// file is the log's; what is the job's is the declaration: a journal whose declaration was
// lost is salvaged behind a new one.
//
//   JournalOpenInfo info;
//   auto journal = JobJournal::Open(path, /*fsync=*/true,
//       [&](const v1::JournalRecord& r) { return state.Replay(r); }, &info);
//   (*journal)->Append(record);
//   absl::Status s = (*journal)->Flush();   // durable when it returns OK (with fsync)
//
// Thread-safe, as RecordLog.
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_JOB_JOURNAL_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_JOB_JOURNAL_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/journal/journal_reader.h"
#include "daemon/journal/record_log.h"
#include "stagefrontier/v1/journal.pb.h"

namespace stagefrontier {

class JobJournal {
 public:
  // Creates the journal at `path` holding `records` (the declaration first), as
  // RecordLog::Create.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JobJournal>> Create(
      const std::string& path, bool fsync, std::span<const v1::JournalRecord> records);

  // Opens the journal at `path`, replaying every intact record through `replay` and repairing
  // damage, as RecordLog::Open (IsNoIntactRecord says when the file should be set aside).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<JobJournal>> Open(const std::string& path,
                                                                        bool fsync,
                                                                        RecordLog::Replay replay,
                                                                        JournalOpenInfo* info);

  // Rewrites the journal at `path`, whose declaration was lost, as a new journal holding
  // `declaration` then every other intact record of the old one (any declarations in it are
  // dropped); the old file is kept under another name (info->kept_original). Fails as
  // RecordLog::Salvage.
  [[nodiscard]] static absl::Status Salvage(const std::string& path, bool fsync,
                                            const v1::JournalRecord& declaration,
                                            JournalOpenInfo* info);

  // Buffers one record; written by Flush.
  void Append(const v1::JournalRecord& record) { log_->Append(record); }
  // JournalRecord{ranks {steps: [steps]}}, without building it (RecordLog::AppendRankSteps).
  void AppendRankSteps(const v1::RankSteps& steps) { log_->AppendRankSteps(steps); }
  // Durable when it returns OK (with fsync); see RecordLog::Flush.
  [[nodiscard]] absl::Status Flush() { return log_->Flush(); }
  uint64_t appended_bytes() const { return log_->appended_bytes(); }
  uint64_t durable_bytes() const { return log_->durable_bytes(); }
  const std::string& path() const { return log_->path(); }

  // The log itself, for live compaction (journal_compactor.h).
  RecordLog& log() { return *log_; }

 private:
  explicit JobJournal(std::unique_ptr<RecordLog> log) : log_(std::move(log)) {}

  std::unique_ptr<RecordLog> log_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_JOB_JOURNAL_H_
