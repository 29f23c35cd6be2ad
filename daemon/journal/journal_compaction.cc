#include "daemon/journal/journal_compaction.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/archive/record_block_builder.h"
#include "daemon/journal/journal_reader.h"
#include "daemon/journal/record_log.h"
#include "daemon/wire/packed_steps.h"

namespace stagefrontier {
namespace {

using Clock = std::chrono::steady_clock;

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Every record of the journal in `data`, blocks expanded; fails as CompactJournal says.
absl::StatusOr<std::vector<v1::JournalRecord>> ReadRecords(const std::string& path,
                                                           const std::string& data) {
  std::vector<v1::JournalRecord> records;
  const JournalScan scan = ScanJournal(data, [&](const v1::JournalRecord& r) {
    records.push_back(r);
    return absl::OkStatus();
  });
  if (scan.format == 0 || !scan.error.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": ", scan.error.empty() ? "not a StageFrontier journal" : scan.error));
  }
  if (!scan.skipped.empty()) {
    uint64_t bytes = 0;
    for (const JournalRegion& r : scan.skipped) bytes += r.bytes;
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": ", bytes, " damaged bytes in ", scan.skipped.size(),
        " region(s) (the first at offset ", scan.skipped[0].offset,
        "); start a coordinator on it to repair it (docs/journal-format.md), then compact"));
  }
  if (records.empty() || !records[0].has_declared()) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": its first record is not the job's declaration"));
  }
  return records;
}

// Decodes every RankSteps of a RanksLogged (steps, flags and durations in order).
bool Flatten(const v1::JournalRecord& r, uint32_t stages, std::vector<int64_t>* out) {
  for (const v1::RankSteps& rs : r.ranks().steps()) {
    if (!wire::DecodePackedSteps(rs.packed(), rs.count(), rs.base_step(), stages,
                                 [&](int64_t step, const int64_t* d, uint32_t flags) {
                                   out->push_back(step);
                                   out->push_back(flags);
                                   out->insert(out->end(), d, d + stages);
                                 })
             .ok()) {
      return false;
    }
  }
  return true;
}

// `back` is `original` byte for byte, or (unit above 1) a step record that differs from it
// only in durations, each by at most half a unit.
bool SameRecord(const v1::JournalRecord& original, const v1::JournalRecord& back, uint32_t stages,
                int64_t unit) {
  if (original.SerializeAsString() == back.SerializeAsString()) return true;
  if (unit == 1 || !original.has_ranks() || !back.has_ranks() ||
      original.ranks().steps_size() != back.ranks().steps_size()) {
    return false;
  }
  v1::JournalRecord a = original, b = back;
  for (int i = 0; i < a.ranks().steps_size(); ++i) {
    a.mutable_ranks()->mutable_steps(i)->clear_packed();
    b.mutable_ranks()->mutable_steps(i)->clear_packed();
  }
  if (a.SerializeAsString() != b.SerializeAsString()) return false;
  std::vector<int64_t> x, y;
  if (!Flatten(original, stages, &x) || !Flatten(back, stages, &y) || x.size() != y.size()) {
    return false;
  }
  const size_t row = stages + 2;
  for (size_t i = 0; i < x.size(); ++i) {
    const bool duration = i % row >= 2;
    if (duration ? std::abs(x[i] - y[i]) > unit / 2 : x[i] != y[i]) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<CompactionReport> CompactJournal(const std::string& input, const std::string& output,
                                                const CompactionOptions& options) {
  absl::StatusOr<std::string> data = ReadWholeFile(input);
  if (!data.ok()) return data.status();
  absl::StatusOr<std::vector<v1::JournalRecord>> records = ReadRecords(input, *data);
  if (!records.ok()) return records.status();

  CompactionReport report;
  report.input_bytes = data->size();
  const v1::JobDeclared& declared = (*records)[0].declared();
  report.job = declared.job();
  report.stages = static_cast<uint32_t>(declared.stages_size());
  const RecordBlockOptions block_options{.stage_count = report.stages,
                                         .zstd_level = options.zstd_level,
                                         .duration_unit_ns = options.duration_unit_ns};

  const auto encode_start = Clock::now();
  std::vector<v1::JournalRecord> out = {(*records)[0]};
  RecordBlockBuilder builder(block_options, options.block_steps);
  auto emit = [&](v1::JournalRecord block) { out.push_back(std::move(block)); };
  for (size_t i = 1; i < records->size(); ++i) {
    if (absl::Status s = builder.Add((*records)[i], emit); !s.ok()) return s;
  }
  if (absl::Status s = builder.Finish(emit); !s.ok()) return s;
  report.blocks = builder.blocks();
  report.totals = builder.totals();
  report.encode_seconds = std::chrono::duration<double>(Clock::now() - encode_start).count();

  absl::StatusOr<std::unique_ptr<RecordLog>> created =
      RecordLog::Create(output, options.fsync, out);
  if (!created.ok()) return created.status();
  created->reset();

  // Read the new file back: the same records, in the same order, or no new file.
  absl::StatusOr<std::string> written = ReadWholeFile(output);
  if (!written.ok()) return written.status();
  report.output_bytes = written->size();
  const auto replay_start = Clock::now();
  absl::StatusOr<std::vector<v1::JournalRecord>> back = ReadRecords(output, *written);
  report.read_back_seconds = std::chrono::duration<double>(Clock::now() - replay_start).count();
  bool same = back.ok() && back->size() == records->size();
  for (size_t i = 0; same && i < records->size(); ++i) {
    same = SameRecord((*records)[i], (*back)[i], report.stages, options.duration_unit_ns);
  }
  if (!same) {
    ::unlink(output.c_str());
    return absl::InternalError(absl::StrCat(
        "the compacted journal did not read back as the original (",
        back.ok() ? "different records" : back.status().message(), "); ", output, " removed"));
  }
  return report;
}

}  // namespace stagefrontier
