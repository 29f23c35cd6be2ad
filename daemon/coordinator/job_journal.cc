#include "daemon/coordinator/job_journal.h"

namespace stagefrontier {

absl::StatusOr<std::unique_ptr<JobJournal>> JobJournal::Create(
    const std::string& path, bool fsync, std::span<const v1::JournalRecord> records) {
  absl::StatusOr<std::unique_ptr<RecordLog>> log = RecordLog::Create(path, fsync, records);
  if (!log.ok()) return log.status();
  return std::unique_ptr<JobJournal>(new JobJournal(*std::move(log)));
}

absl::StatusOr<std::unique_ptr<JobJournal>> JobJournal::Open(const std::string& path, bool fsync,
                                                             RecordLog::Replay replay,
                                                             JournalOpenInfo* info) {
  absl::StatusOr<std::unique_ptr<RecordLog>> log = RecordLog::Open(path, fsync, replay, info);
  if (!log.ok()) return log.status();
  return std::unique_ptr<JobJournal>(new JobJournal(*std::move(log)));
}

absl::Status JobJournal::Salvage(const std::string& path, bool fsync,
                                 const v1::JournalRecord& declaration, JournalOpenInfo* info) {
  // The new declaration replaces any the old file still holds.
  return RecordLog::Salvage(
      path, fsync, declaration,
      [](const v1::JournalRecord& r) { return r.body_case() != v1::JournalRecord::kDeclared; },
      info);
}

}  // namespace stagefrontier
