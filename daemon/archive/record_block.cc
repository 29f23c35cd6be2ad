#include "daemon/archive/record_block.h"

#include <array>
#include <memory>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/archive/column_codec.h"
#include "daemon/wire/packed_steps.h"
#include "daemon/wire/varint.h"
#include "shm/record_limits.h"
#include "shm/segment_layout_v1.h"

namespace stagefrontier {
namespace {

using wire::GetVarint;
using wire::PutVarint;
using wire::UnZigZag;
using wire::ZigZag;

enum Kind : uint8_t { kWhole = 0, kRanks = 1, kClosed = 2 };

// The columns, in the order they are stored (docs/journal-format.md, "Record blocks").
enum Column : int {
  kKinds,      // one byte per record: Kind
  kWholeRecs,  // per whole record: length, serialized JournalRecord
  kClosedCol,  // per StepClosed: zigzag(step - previous closed step)
  kGroups,     // per RanksLogged: number of RankSteps
  kJobs,       // per RankSteps: job index; == jobs so far means a new job, named in kStrings
  kStrings,    // per new job: length, bytes
  kHeads,  // per RankSteps: zigzag(rank - previous rank), zigzag(base_step - series next), count
  kGaps,   // per step after a RankSteps' first: step delta - 1
  kFlags,  // per step: record flags
  kDurations,  // per series (job, rank) in order of appearance, per stage, per step:
               // zigzag(duration - previous duration of that series and stage)
  kColumnCount
};
constexpr std::array<const char*, kColumnCount> kColumnNames = {
    "kinds",     "whole records", "closed steps", "groups", "jobs",
    "job names", "heads",         "step gaps",    "flags",  "durations"};

uint64_t SeriesKey(uint32_t job, int32_t rank) {
  return (uint64_t{job} << 32) | static_cast<uint32_t>(rank);
}

// One series' durations, step-major (step t, stage k at t * stages + k).
struct Series {
  int64_t next_step = 0;
  std::vector<int64_t> durations;
};

class Encoder {
 public:
  Encoder(uint32_t stages, int64_t unit_ns) : stages_(stages), unit_(unit_ns) {}

  void Add(const v1::JournalRecord& record, RecordBlockStats* stats) {
    const size_t size = record.ByteSizeLong();
    stats->input_bytes += size;
    if (record.has_closed() && Rebuilt(record).ByteSizeLong() == size) {
      col_[kKinds].push_back(kClosed);
      const int64_t step = record.closed().step();
      PutVarint(col_[kClosedCol],
                ZigZag(static_cast<int64_t>(static_cast<uint64_t>(step) -
                                            static_cast<uint64_t>(last_closed_))));
      last_closed_ = step;
      return;
    }
    if (record.has_ranks() && AddRanks(record, size, stats)) return;
    const std::string original = record.SerializeAsString();
    col_[kKinds].push_back(kWhole);
    PutVarint(col_[kWholeRecs], original.size());
    col_[kWholeRecs].append(original);
    ++stats->whole_records;
  }

  // The block's content: its parameters, then the columns.
  std::string Content(uint64_t records) {
    for (const Series& s : series_) {
      const size_t steps = s.durations.size() / stages_;
      for (uint32_t k = 0; k < stages_; ++k) {
        int64_t previous = 0;
        for (size_t t = 0; t < steps; ++t) {
          const int64_t d = s.durations[t * stages_ + k];
          PutVarint(col_[kDurations], ZigZag(d - previous));
          previous = d;
        }
      }
    }
    std::string raw;
    PutVarint(raw, stages_);
    PutVarint(raw, static_cast<uint64_t>(unit_));
    PutVarint(raw, records);
    archive::AppendColumns(col_, &raw);
    return raw;
  }

 private:
  // Whether a record decodes back to itself is decided by size (issue 33: serializing each
  // record twice to compare the bytes was most of the live compactor's time). The rebuilt record
  // holds a subset of the record's fields with the same values, and a message's size is the sum
  // of its fields' (a nested message's grows with it): equal sizes, equal records. Whatever the
  // columns do not keep (a field added later, unknown fields) makes the record larger.
  static v1::JournalRecord Rebuilt(const v1::JournalRecord& record) {
    v1::JournalRecord copy;
    if (record.has_closed()) copy.mutable_closed()->set_step(record.closed().step());
    return copy;
  }

  // `d` in units of unit_ns, rounded to the nearest (never above a day).
  int64_t InUnits(int64_t d) const {
    int64_t r = (d + unit_ / 2) / unit_;
    if (r * unit_ > shm::kMaxStageNs) --r;
    return r;
  }

  // Takes a RanksLogged apart when it decodes back to `record` (of `size` bytes; with rounded
  // durations: to `record` with each packed vector rounded); false (nothing written) otherwise.
  bool AddRanks(const v1::JournalRecord& record, size_t size, RecordBlockStats* stats) {
    if (!Rebuilds(record, size)) return false;
    WriteRanks(record, stats);
    return true;
  }

  // Decodes each RankSteps of `record` into decoded_ and rebuilds the record from them into
  // rebuilt_: true when the rebuilt record is the record (see Rebuilt on why sizes tell).
  bool Rebuilds(const v1::JournalRecord& record, size_t size) {
    // The scratch of earlier records serves again (no allocation once warm).
    if (decoded_.size() < static_cast<size_t>(record.ranks().steps_size())) {
      decoded_.resize(record.ranks().steps_size());
    }
    // Steps cleared, not the record: clearing the oneof would free its RanksLogged and all in it.
    rebuilt_.mutable_ranks()->mutable_steps()->Clear();
    for (int i = 0; i < record.ranks().steps_size(); ++i) {
      const v1::RankSteps& rs = record.ranks().steps(i);
      if (rs.collectives_size() > 0) return false;
      Decoded& d = decoded_[i];
      d.steps.clear();
      d.flags.clear();
      d.durations.clear();
      packed_.Clear();
      const absl::Status s =
          wire::DecodePackedSteps(rs.packed(), rs.count(), rs.base_step(), stages_,
                                  [&](int64_t step, const int64_t* durations, uint32_t flags) {
                                    int64_t kept[shm::v1::kMaxStages];
                                    for (uint32_t k = 0; k < stages_; ++k) {
                                      d.durations.push_back(InUnits(durations[k]));
                                      kept[k] = d.durations.back() * unit_;
                                    }
                                    d.steps.push_back(step);
                                    d.flags.push_back(flags);
                                    packed_.Add(step, kept, flags);
                                  });
      if (!s.ok()) return false;
      v1::RankSteps* out = rebuilt_.mutable_ranks()->add_steps();
      out->set_job(rs.job());
      out->set_rank(rs.rank());
      out->set_base_step(rs.base_step());
      out->set_count(rs.count());
      // Lossless durations: the packed bytes must come back as they were.
      if (unit_ == 1 && packed_.bytes() != rs.packed()) return false;
      out->set_packed(packed_.bytes());
    }
    if (unit_ == 1) return rebuilt_.ByteSizeLong() == size;
    // Rounded durations: the record with each packed vector rounded must come back as is.
    v1::JournalRecord rounded = record;
    for (int i = 0; i < rounded.ranks().steps_size(); ++i) {
      rounded.mutable_ranks()->mutable_steps(i)->set_packed(rebuilt_.ranks().steps(i).packed());
    }
    return rebuilt_.ByteSizeLong() == rounded.ByteSizeLong();
  }

  // Writes `record`'s RankSteps, decoded into decoded_, into the columns.
  void WriteRanks(const v1::JournalRecord& record, RecordBlockStats* stats) {
    col_[kKinds].push_back(kRanks);
    PutVarint(col_[kGroups], record.ranks().steps_size());
    for (int i = 0; i < record.ranks().steps_size(); ++i) {
      const v1::RankSteps& rs = record.ranks().steps(i);
      const Decoded& d = decoded_[i];
      auto [job, fresh_job] = jobs_.try_emplace(rs.job(), static_cast<uint32_t>(jobs_.size()));
      PutVarint(col_[kJobs], job->second);
      if (fresh_job) {
        PutVarint(col_[kStrings], rs.job().size());
        col_[kStrings].append(rs.job());
      }
      auto [it, fresh_series] = series_index_.try_emplace(SeriesKey(job->second, rs.rank()),
                                                          static_cast<uint32_t>(series_.size()));
      if (fresh_series) series_.emplace_back();
      Series& series = series_[it->second];
      PutVarint(col_[kHeads], ZigZag(int64_t{rs.rank()} - last_rank_));
      last_rank_ = rs.rank();
      PutVarint(col_[kHeads], ZigZag(rs.base_step() - series.next_step));
      PutVarint(col_[kHeads], rs.count());
      for (size_t t = 0; t < d.steps.size(); ++t) {
        if (t > 0) PutVarint(col_[kGaps], static_cast<uint64_t>(d.steps[t] - d.steps[t - 1] - 1));
        PutVarint(col_[kFlags], d.flags[t]);
      }
      if (!d.steps.empty()) series.next_step = d.steps.back() + 1;
      series.durations.insert(series.durations.end(), d.durations.begin(), d.durations.end());
      stats->rank_steps += d.steps.size();
      stats->rank_stage_steps += d.steps.size() * stages_;
    }
  }

  struct Decoded {
    std::vector<int64_t> steps;
    std::vector<uint32_t> flags;
    std::vector<int64_t> durations;
  };

  const uint32_t stages_;
  const int64_t unit_;
  std::vector<Decoded> decoded_;  // what Rebuilds decoded, for WriteRanks
  v1::JournalRecord rebuilt_;
  wire::PackedStepsEncoder packed_{stages_};
  std::array<std::string, kColumnCount> col_;
  int64_t last_closed_ = 0;
  int64_t last_rank_ = 0;
  std::unordered_map<std::string, uint32_t> jobs_;
  std::unordered_map<uint64_t, uint32_t> series_index_;
  std::vector<Series> series_;
};

constexpr const char* kFormat = "record block";

absl::Status Bad(absl::string_view what) { return archive::BadBlock(kFormat, what); }

using archive::ColumnReader;

// A RankSteps whose packed bytes are written once every series' durations are read.
struct PendingSteps {
  v1::RankSteps* out;
  uint32_t series;
  size_t first;      // index into the decoder's steps / flags
  size_t series_t0;  // its first step's index within the series
  uint32_t count;
};

// Reads a block's columns back into records, the encoder's steps in reverse: each record by
// its kind, then every series' durations (stored series by series, after all the heads), then
// the packed bytes of every RankSteps.
class ColumnDecoder {
 public:
  ColumnDecoder(uint32_t stages, int64_t unit) : stages_(stages), unit_(unit) {}

  absl::Status Decode(absl::string_view raw, uint64_t record_count,
                      std::vector<v1::JournalRecord>* records) {
    SF_RETURN_IF_ERROR(archive::SplitColumns(raw, kColumnNames, kFormat, col_));
    if (col_[kKinds].left() != record_count) {
      return Bad(absl::StrCat(col_[kKinds].left(), " kinds for ", record_count, " records"));
    }
    records->reserve(record_count);
    for (uint64_t r = 0; r < record_count; ++r) {
      SF_RETURN_IF_ERROR(DecodeRecord(r, &records->emplace_back()));
    }
    std::vector<std::vector<int64_t>> durations;
    SF_RETURN_IF_ERROR(DecodeDurations(&durations));
    for (int c = 0; c < kColumnCount; ++c) SF_RETURN_IF_ERROR(col_[c].Done());
    for (const PendingSteps& p : pending_) {
      wire::PackedStepsEncoder packed(stages_);
      for (uint32_t t = 0; t < p.count; ++t) {
        packed.Add(steps_[p.first + t], &durations[p.series][(p.series_t0 + t) * stages_],
                   flags_[p.first + t]);
      }
      p.out->set_packed(packed.bytes());
    }
    return absl::OkStatus();
  }

 private:
  absl::Status DecodeRecord(uint64_t r, v1::JournalRecord* record) {
    absl::string_view kind_byte;
    SF_RETURN_IF_ERROR(col_[kKinds].Bytes(1, &kind_byte));
    const uint8_t kind = static_cast<uint8_t>(kind_byte[0]);
    uint64_t v = 0;
    if (kind == kWhole) {
      absl::string_view bytes;
      SF_RETURN_IF_ERROR(col_[kWholeRecs].Varint(&v));
      SF_RETURN_IF_ERROR(col_[kWholeRecs].Bytes(v, &bytes));
      if (!record->ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) ||
          record->body_case() == v1::JournalRecord::BODY_NOT_SET) {
        return Bad(absl::StrCat("record ", r, " does not parse as a journal record"));
      }
      if (record->has_block()) return Bad(absl::StrCat("record ", r, " is a block in a block"));
      return absl::OkStatus();
    }
    if (kind == kClosed) {
      SF_RETURN_IF_ERROR(col_[kClosedCol].Varint(&v));
      last_closed_ = static_cast<int64_t>(static_cast<uint64_t>(last_closed_) +
                                          static_cast<uint64_t>(UnZigZag(v)));
      record->mutable_closed()->set_step(last_closed_);
      return absl::OkStatus();
    }
    if (kind != kRanks) return Bad(absl::StrCat("record ", r, ": unknown kind ", int{kind}));
    uint64_t groups = 0;
    SF_RETURN_IF_ERROR(col_[kGroups].Varint(&groups));
    // Every RankSteps takes at least three head bytes.
    if (groups > col_[kHeads].left() / 3) {
      return Bad(absl::StrCat("record ", r, ": ", groups, " rank-steps"));
    }
    v1::RanksLogged* ranks = record->mutable_ranks();
    for (uint64_t g = 0; g < groups; ++g) {
      SF_RETURN_IF_ERROR(DecodeRankSteps(r, ranks->add_steps()));
    }
    return absl::OkStatus();
  }

  // One RankSteps' job, rank, base step and steps; its packed bytes wait for the durations.
  absl::Status DecodeRankSteps(uint64_t r, v1::RankSteps* rs) {
    uint64_t v = 0;
    SF_RETURN_IF_ERROR(col_[kJobs].Varint(&v));
    if (v > jobs_.size()) return Bad(absl::StrCat("record ", r, ": job index ", v));
    if (v == jobs_.size()) {
      uint64_t len = 0;
      absl::string_view name;
      SF_RETURN_IF_ERROR(col_[kStrings].Varint(&len));
      SF_RETURN_IF_ERROR(col_[kStrings].Bytes(len, &name));
      jobs_.emplace_back(name);
    }
    const uint32_t job = static_cast<uint32_t>(v);
    rs->set_job(jobs_[job]);
    SF_RETURN_IF_ERROR(col_[kHeads].Varint(&v));
    const int64_t rank_delta = UnZigZag(v);
    if (rank_delta > (int64_t{1} << 33) || rank_delta < -(int64_t{1} << 33) ||
        last_rank_ + rank_delta < INT32_MIN || last_rank_ + rank_delta > INT32_MAX) {
      return Bad(absl::StrCat("record ", r, ": rank out of range"));
    }
    last_rank_ += rank_delta;
    rs->set_rank(static_cast<int32_t>(last_rank_));
    auto [it, fresh] = series_index_.try_emplace(SeriesKey(job, rs->rank()),
                                                 static_cast<uint32_t>(series_next_.size()));
    if (fresh) {
      series_next_.push_back(0);
      series_steps_.push_back(0);
    }
    const uint32_t series = it->second;
    SF_RETURN_IF_ERROR(col_[kHeads].Varint(&v));
    const int64_t delta = UnZigZag(v);
    if (delta > shm::kMaxStepNumber || delta < -shm::kMaxStepNumber ||
        !shm::ValidStepNumber(series_next_[series] + delta)) {
      return Bad(absl::StrCat("record ", r, ": base step out of range"));
    }
    const int64_t base_step = series_next_[series] + delta;
    uint64_t count = 0;
    SF_RETURN_IF_ERROR(col_[kHeads].Varint(&count));
    if (count > wire::kMaxPackedCount || count > col_[kFlags].left()) {
      return Bad(absl::StrCat("record ", r, ": ", count, " steps"));
    }
    rs->set_base_step(base_step);
    rs->set_count(static_cast<uint32_t>(count));
    pending_.push_back(
        {rs, series, steps_.size(), series_steps_[series], static_cast<uint32_t>(count)});
    int64_t step = base_step;
    for (uint64_t t = 0; t < count; ++t) {
      if (t > 0) {
        SF_RETURN_IF_ERROR(col_[kGaps].Varint(&v));
        if (v >= static_cast<uint64_t>(shm::kMaxStepNumber - step)) {
          return Bad(absl::StrCat("record ", r, ": step out of range"));
        }
        step += static_cast<int64_t>(v) + 1;
      }
      uint64_t f = 0;
      SF_RETURN_IF_ERROR(col_[kFlags].Varint(&f));
      if (f > 0xffffffffULL) return Bad(absl::StrCat("record ", r, ": flags out of range"));
      steps_.push_back(step);
      flags_.push_back(static_cast<uint32_t>(f));
    }
    if (count > 0) series_next_[series] = step + 1;
    series_steps_[series] += count;
    return absl::OkStatus();
  }

  // Every series' durations, stage by stage, each a delta from the series' previous step.
  absl::Status DecodeDurations(std::vector<std::vector<int64_t>>* durations) {
    // Every duration takes at least one byte: check before allocating.
    if (steps_.size() > col_[kDurations].left() / stages_) {
      return Bad(absl::StrCat(steps_.size(), " steps of ", stages_, " stages in ",
                              col_[kDurations].left(), " duration bytes"));
    }
    durations->assign(series_steps_.size(), {});
    for (size_t s = 0; s < series_steps_.size(); ++s) {
      const size_t n = series_steps_[s];
      std::vector<int64_t>& series = (*durations)[s];
      series.resize(n * stages_);
      for (uint32_t k = 0; k < stages_; ++k) {
        int64_t previous = 0;
        for (size_t t = 0; t < n; ++t) {
          uint64_t v = 0;
          SF_RETURN_IF_ERROR(col_[kDurations].Varint(&v));
          const int64_t delta = UnZigZag(v);
          if (delta > shm::kMaxStageNs || delta < -shm::kMaxStageNs ||
              !shm::ValidStageDuration((previous + delta) * unit_)) {
            return Bad(absl::StrCat("a duration out of range in series ", s));
          }
          previous += delta;
          series[t * stages_ + k] = previous * unit_;
        }
      }
    }
    return absl::OkStatus();
  }

  const uint32_t stages_;
  const int64_t unit_;
  std::array<ColumnReader, kColumnCount> col_;
  std::vector<std::string> jobs_;
  std::unordered_map<uint64_t, uint32_t> series_index_;
  std::vector<int64_t> series_next_;   // per series: the step after its last one
  std::vector<size_t> series_steps_;  // per series: steps so far
  std::vector<int64_t> steps_;        // every RankSteps' steps, in record order
  std::vector<uint32_t> flags_;
  std::vector<PendingSteps> pending_;
  int64_t last_closed_ = 0;
  int64_t last_rank_ = 0;
};

absl::Status DecodeColumns(absl::string_view raw, uint32_t stages, int64_t unit,
                           uint64_t record_count, std::vector<v1::JournalRecord>* records) {
  return ColumnDecoder(stages, unit).Decode(raw, record_count, records);
}

}  // namespace

absl::StatusOr<std::string> EncodeRecordBlock(const std::vector<v1::JournalRecord>& records,
                                              const RecordBlockOptions& options,
                                              RecordBlockStats* stats) {
  RecordBlockStats local;
  if (stats == nullptr) stats = &local;
  *stats = {};
  if (options.stage_count == 0 || options.stage_count > shm::v1::kMaxStages) {
    return absl::InvalidArgumentError(absl::StrCat("record block: ", options.stage_count,
                                                   " stages (1..", shm::v1::kMaxStages, ")"));
  }
  if (records.empty() || records.size() > kMaxRecordBlockRecords) {
    return absl::InvalidArgumentError(absl::StrCat("record block: ", records.size(),
                                                   " records (1..", kMaxRecordBlockRecords, ")"));
  }
  if (options.duration_unit_ns < 1 || options.duration_unit_ns > kMaxRecordBlockUnitNs) {
    return absl::InvalidArgumentError(absl::StrCat("record block: a duration unit of ",
                                                   options.duration_unit_ns, " ns (1..",
                                                   kMaxRecordBlockUnitNs, ")"));
  }
  Encoder encoder(options.stage_count, options.duration_unit_ns);
  for (const v1::JournalRecord& r : records) {
    if (r.has_block()) {
      return absl::InvalidArgumentError("record block: a block cannot hold another block");
    }
    encoder.Add(r, stats);
  }
  stats->records = records.size();
  const std::string raw = encoder.Content(records.size());
  stats->column_bytes = raw.size();
  if (raw.size() > kMaxRecordBlockRawBytes) {
    return absl::InvalidArgumentError(absl::StrCat("record block: ", raw.size(),
                                                   " bytes of columns, over ",
                                                   kMaxRecordBlockRawBytes, ": use fewer records"));
  }
  std::string block;
  block.push_back(static_cast<char>(kRecordBlockVersion));
  PutVarint(block, raw.size());
  SF_RETURN_IF_ERROR(archive::AppendZstdFrame(raw, options.zstd_level, kFormat, &block));
  stats->block_bytes = block.size();
  return block;
}

absl::Status DecodeRecordBlock(absl::string_view block,
                               absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink,
                               RecordBlockInfo* info) {
  if (block.empty()) return Bad("empty");
  const uint8_t version = static_cast<uint8_t>(block[0]);
  if (version > kRecordBlockVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "record block version ", int{version}, " is newer than the versions this build reads (1..",
        int{kRecordBlockVersion}, "): upgrade"));
  }
  if (version == 0) return Bad("version 0 does not exist");
  const char* p = block.data() + 1;
  const char* end = block.data() + block.size();
  uint64_t raw_size = 0;
  if (!GetVarint(p, end, &raw_size)) return Bad("cut short in its header");
  if (raw_size > kMaxRecordBlockRawBytes) {
    return Bad(absl::StrCat(raw_size, " bytes of columns, over ", kMaxRecordBlockRawBytes));
  }
  absl::StatusOr<std::string> raw =
      archive::DecompressZstdFrame(absl::string_view(p, static_cast<size_t>(end - p)), raw_size,
                                   kFormat);
  if (!raw.ok()) return raw.status();
  // The parameters lie inside the frame, under its checksum.
  ColumnReader params(*raw, kFormat, "parameters");
  uint64_t stages = 0, unit = 0, record_count = 0;
  SF_RETURN_IF_ERROR(params.Varint(&stages));
  SF_RETURN_IF_ERROR(params.Varint(&unit));
  SF_RETURN_IF_ERROR(params.Varint(&record_count));
  if (stages == 0 || stages > shm::v1::kMaxStages) {
    return Bad(absl::StrCat(stages, " stages (1..", shm::v1::kMaxStages, ")"));
  }
  if (unit < 1 || unit > kMaxRecordBlockUnitNs) {
    return Bad(absl::StrCat("a duration unit of ", unit, " ns (1..", kMaxRecordBlockUnitNs, ")"));
  }
  if (record_count == 0 || record_count > kMaxRecordBlockRecords) {
    return Bad(absl::StrCat(record_count, " records (1..", kMaxRecordBlockRecords, ")"));
  }
  std::vector<v1::JournalRecord> records;
  SF_RETURN_IF_ERROR(DecodeColumns(absl::string_view(*raw).substr(raw->size() - params.left()),
                                   static_cast<uint32_t>(stages), static_cast<int64_t>(unit),
                                   record_count, &records));
  if (info != nullptr) {
    info->stage_count = static_cast<uint32_t>(stages);
    info->duration_unit_ns = static_cast<int64_t>(unit);
    info->records = record_count;
  }
  for (const v1::JournalRecord& r : records) SF_RETURN_IF_ERROR(sink(r));
  return absl::OkStatus();
}

}  // namespace stagefrontier
