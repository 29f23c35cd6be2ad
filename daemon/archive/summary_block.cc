#include "daemon/archive/summary_block.h"

#include <array>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/archive/column_codec.h"
#include "daemon/wire/varint.h"
#include "shm/segment_layout_v1.h"

namespace stagefrontier {
namespace {

using archive::ColumnReader;
using wire::PutVarint;
using wire::ZigZag;

constexpr const char* kFormat = "summary block";

enum Kind : uint8_t { kColumns = 0, kWhole = 1 };

// The columns of each frame, in the order they are stored (docs/journal-format.md).
enum FrontierColumn : int {
  kKinds,       // one byte per summary: Kind
  kWholeSteps,  // per whole summary: length, serialized StepSummary
  kSteps,       // zigzag(step - previous step - 1); the first previous step is -1
  kFlags,       // bit 0: partial; bit 1: missing ranks follow
  kMissing,     // per summary with missing ranks: count, then zigzag(rank - previous rank)
  kFirstExcess, // 0: none; i: the i-th name (a name one past the known ones follows in kNames)
  kNames,       // per new first-excess stage name: length, bytes
  kExposed,     // zigzag(exposed - sum of the stage increments)
  kIncrements,  // per stage, per summary: zigzag(increment - previous increment of the stage)
  kLeaders,     // per stage, per summary: zigzag(leader - previous leader of the stage)
  kFrontierColumnCount
};
constexpr std::array<const char*, kFrontierColumnCount> kFrontierNames = {
    "kinds", "whole summaries", "steps", "flags", "missing ranks", "first excess",
    "names", "exposed", "increments", "leaders"};

enum DetailColumn : int {
  kMargins,    // per stage, per summary: zigzag(margin - previous margin of the stage)
  kBaselines,  // per stage, per summary: zigzag(baseline - previous baseline of the stage)
  kExcess,     // per stage, per summary: zigzag(excess - (increment - baseline))
  kMeans,      // per stage, per summary: the delta over time of (mean - max)
  kMaxes,      // per stage, per summary: the delta over time of (max - increment)
  kDetailColumnCount
};
constexpr std::array<const char*, kDetailColumnCount> kDetailNames = {"margins", "baselines",
                                                                      "excess", "means", "maxes"};

// Wrapping arithmetic: deltas of any int64 values round-trip without overflow.
int64_t Sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t Add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

absl::Status Bad(absl::string_view what) { return archive::BadBlock(kFormat, what); }

// The seven per-stage fields, in proto order.
enum Field : int { kInc, kLeader, kMargin, kBaseline, kExcessField, kMean, kMax, kFieldCount };

int64_t Get(const v1::StageStep& s, int f) {
  switch (f) {
    case kInc: return s.increment_ns();
    case kLeader: return s.leader();
    case kMargin: return s.margin_ns();
    case kBaseline: return s.baseline_ns();
    case kExcessField: return s.excess_ns();
    case kMean: return s.mean_ns();
    default: return s.max_ns();
  }
}

int64_t SumIncrements(const v1::StepSummary& s) {
  int64_t sum = 0;
  for (const v1::StageStep& st : s.stages()) sum = Add(sum, st.increment_ns());
  return sum;
}

class Encoder {
 public:
  explicit Encoder(uint32_t stages) : stages_(stages), series_(kFieldCount) {}

  void Add(const v1::StepSummary& s, SummaryBlockStats* stats) {
    const std::string original = s.SerializeAsString();
    stats->input_bytes += original.size();
    if (static_cast<uint32_t>(s.stages_size()) != stages_ || Rebuilt(s) != original) {
      f_[kKinds].push_back(static_cast<char>(kWhole));
      PutVarint(f_[kWholeSteps], original.size());
      f_[kWholeSteps].append(original);
      ++stats->whole_steps;
      return;
    }
    f_[kKinds].push_back(static_cast<char>(kColumns));
    PutVarint(f_[kSteps], ZigZag(Sub(Sub(s.step(), last_step_), 1)));
    last_step_ = s.step();
    PutVarint(f_[kFlags], (s.partial() ? 1u : 0u) | (s.missing_ranks_size() > 0 ? 2u : 0u));
    if (s.missing_ranks_size() > 0) {
      PutVarint(f_[kMissing], static_cast<uint64_t>(s.missing_ranks_size()));
      int64_t previous = -1;
      for (int32_t r : s.missing_ranks()) {
        PutVarint(f_[kMissing], ZigZag(int64_t{r} - previous));
        previous = r;
      }
    }
    PutVarint(f_[kFirstExcess], NameIndex(s.first_excess_stage()));
    PutVarint(f_[kExposed], ZigZag(Sub(s.exposed_ns(), SumIncrements(s))));
    for (int f = 0; f < kFieldCount; ++f) {
      for (const v1::StageStep& st : s.stages()) series_[f].push_back(Get(st, f));
    }
    ++columnar_;
  }

  // The two frames' raw contents.
  std::pair<std::string, std::string> Content(uint64_t count) {
    // Each (field, stage) series over time, stage by stage.
    auto series = [&](int field, std::string* out, auto value) {
      for (uint32_t k = 0; k < stages_; ++k) {
        int64_t previous = 0;
        for (size_t t = 0; t < columnar_; ++t) {
          const int64_t v = value(t, k);
          PutVarint(*out, ZigZag(Sub(v, previous)));
          previous = field == kExcessField ? 0 : v;
        }
      }
    };
    auto at = [&](int field) {
      return [this, field](size_t t, uint32_t k) { return series_[field][t * stages_ + k]; };
    };
    series(kInc, &f_[kIncrements], at(kInc));
    series(kLeader, &f_[kLeaders], at(kLeader));
    std::array<std::string, kDetailColumnCount> d;
    series(kMargin, &d[kMargins], at(kMargin));
    series(kBaseline, &d[kBaselines], at(kBaseline));
    series(kExcessField, &d[kExcess], [this](size_t t, uint32_t k) {
      const size_t i = t * stages_ + k;
      return Sub(series_[kExcessField][i], Sub(series_[kInc][i], series_[kBaseline][i]));
    });
    series(kMean, &d[kMeans], [this](size_t t, uint32_t k) {
      const size_t i = t * stages_ + k;
      return Sub(series_[kMean][i], series_[kMax][i]);
    });
    series(kMax, &d[kMaxes], [this](size_t t, uint32_t k) {
      const size_t i = t * stages_ + k;
      return Sub(series_[kMax][i], series_[kInc][i]);
    });
    std::string frontier;
    PutVarint(frontier, stages_);
    PutVarint(frontier, count);
    archive::AppendColumns(f_, &frontier);
    std::string detail;
    archive::AppendColumns(d, &detail);
    return {std::move(frontier), std::move(detail)};
  }

 private:
  static std::string Rebuilt(const v1::StepSummary& s) {
    v1::StepSummary copy;
    copy.set_step(s.step());
    copy.set_exposed_ns(s.exposed_ns());
    copy.set_partial(s.partial());
    for (int32_t r : s.missing_ranks()) copy.add_missing_ranks(r);
    copy.set_first_excess_stage(s.first_excess_stage());
    for (const v1::StageStep& st : s.stages()) {
      v1::StageStep* c = copy.add_stages();
      c->set_increment_ns(st.increment_ns());
      c->set_leader(st.leader());
      c->set_margin_ns(st.margin_ns());
      c->set_baseline_ns(st.baseline_ns());
      c->set_excess_ns(st.excess_ns());
      c->set_mean_ns(st.mean_ns());
      c->set_max_ns(st.max_ns());
    }
    return copy.SerializeAsString();
  }

  uint64_t NameIndex(const std::string& name) {
    if (name.empty()) return 0;
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] == name) return i + 1;
    }
    names_.push_back(name);
    PutVarint(f_[kNames], name.size());
    f_[kNames].append(name);
    return names_.size();
  }

  uint32_t stages_;
  std::array<std::string, kFrontierColumnCount> f_;
  std::vector<std::vector<int64_t>> series_;  // per field: t * stages + k
  std::vector<std::string> names_;
  int64_t last_step_ = -1;
  size_t columnar_ = 0;
};

// Reads one (field, stage) series per stage into values[t * stages + k].
absl::Status ReadSeries(ColumnReader& col, size_t n, uint32_t stages, bool delta,
                        std::vector<int64_t>* values) {
  values->assign(n * stages, 0);
  for (uint32_t k = 0; k < stages; ++k) {
    int64_t previous = 0;
    for (size_t t = 0; t < n; ++t) {
      int64_t v = 0;
      SF_RETURN_IF_ERROR(col.Signed(&v));
      const int64_t value = Add(previous, v);
      (*values)[t * stages + k] = value;
      if (delta) previous = value;
    }
  }
  return absl::OkStatus();
}

using FrontierColumns = std::array<ColumnReader, kFrontierColumnCount>;
using DetailColumns = std::array<ColumnReader, kDetailColumnCount>;
using StageFields = std::array<std::vector<int64_t>, kFieldCount>;

// Every per-stage field of the n columnar steps, at t * stages + k, as the encoder had them
// (max and mean are stored against the increment and the max).
absl::Status ReadStageFields(FrontierColumns& f, DetailColumns& d, size_t n, uint32_t stages,
                             StageFields* series) {
  // Every value takes at least one byte: check before allocating.
  const uint64_t values = static_cast<uint64_t>(n) * stages;
  for (ColumnReader* c : {&f[kIncrements], &f[kLeaders], &d[kMargins], &d[kBaselines],
                          &d[kExcess], &d[kMeans], &d[kMaxes]}) {
    if (c->left() < values) return Bad(absl::StrCat(n, " steps of ", stages, " stages in ",
                                                    c->left(), " bytes of a stage column"));
  }
  StageFields& s = *series;
  SF_RETURN_IF_ERROR(ReadSeries(f[kIncrements], n, stages, true, &s[kInc]));
  SF_RETURN_IF_ERROR(ReadSeries(f[kLeaders], n, stages, true, &s[kLeader]));
  SF_RETURN_IF_ERROR(ReadSeries(d[kMargins], n, stages, true, &s[kMargin]));
  SF_RETURN_IF_ERROR(ReadSeries(d[kBaselines], n, stages, true, &s[kBaseline]));
  SF_RETURN_IF_ERROR(ReadSeries(d[kExcess], n, stages, false, &s[kExcessField]));
  SF_RETURN_IF_ERROR(ReadSeries(d[kMeans], n, stages, true, &s[kMean]));
  SF_RETURN_IF_ERROR(ReadSeries(d[kMaxes], n, stages, true, &s[kMax]));
  for (size_t i = 0; i < values; ++i) {
    s[kMax][i] = Add(s[kMax][i], s[kInc][i]);
    s[kMean][i] = Add(s[kMean][i], s[kMax][i]);
  }
  return absl::OkStatus();
}

// Summary i's missing ranks: a count, then deltas from the previous one.
absl::Status ReadMissingRanks(ColumnReader& col, uint64_t i, v1::StepSummary* s) {
  uint64_t missing = 0;
  SF_RETURN_IF_ERROR(col.Varint(&missing));
  if (missing == 0 || missing > col.left()) {
    return Bad(absl::StrCat("summary ", i, ": ", missing, " missing ranks"));
  }
  int64_t rank = -1;
  for (uint64_t m = 0; m < missing; ++m) {
    int64_t delta = 0;
    SF_RETURN_IF_ERROR(col.Signed(&delta));
    rank = Add(rank, delta);
    if (rank < std::numeric_limits<int32_t>::min() ||
        rank > std::numeric_limits<int32_t>::max()) {
      return Bad(absl::StrCat("summary ", i, ": a missing rank out of range"));
    }
    s->add_missing_ranks(static_cast<int32_t>(rank));
  }
  return absl::OkStatus();
}

// Reads the columns of a block's frames back into summaries: the per-stage fields first (they
// are stored field by field), then each step by its kind.
class FrameDecoder {
 public:
  FrameDecoder(uint32_t stages, FrontierColumns& f) : stages_(stages), f_(f) {}

  absl::Status Decode(absl::string_view kinds, const StageFields& series,
                      std::vector<v1::StepSummary>* decoded) {
    decoded->resize(kinds.size());
    size_t t = 0;  // columnar steps so far: the index into the stage fields
    for (size_t i = 0; i < kinds.size(); ++i) {
      v1::StepSummary& s = (*decoded)[i];
      if (kinds[i] == kWhole) {
        SF_RETURN_IF_ERROR(DecodeWhole(i, &s));
      } else {
        SF_RETURN_IF_ERROR(DecodeColumnar(i, series, t++, &s));
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status DecodeWhole(uint64_t i, v1::StepSummary* s) {
    uint64_t v = 0;
    absl::string_view bytes;
    SF_RETURN_IF_ERROR(f_[kWholeSteps].Varint(&v));
    SF_RETURN_IF_ERROR(f_[kWholeSteps].Bytes(v, &bytes));
    if (!s->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      return Bad(absl::StrCat("summary ", i, " does not parse as a step summary"));
    }
    return absl::OkStatus();
  }

  absl::Status DecodeColumnar(uint64_t i, const StageFields& series, size_t t,
                              v1::StepSummary* s) {
    int64_t gap = 0;
    SF_RETURN_IF_ERROR(f_[kSteps].Signed(&gap));
    last_step_ = Add(Add(last_step_, gap), 1);
    s->set_step(last_step_);
    uint64_t v = 0;
    SF_RETURN_IF_ERROR(f_[kFlags].Varint(&v));
    if (v > 3) return Bad(absl::StrCat("summary ", i, ": flags ", v));
    s->set_partial((v & 1) != 0);
    if ((v & 2) != 0) SF_RETURN_IF_ERROR(ReadMissingRanks(f_[kMissing], i, s));
    SF_RETURN_IF_ERROR(ReadFirstExcess(i, s));
    int64_t exposed = 0;
    SF_RETURN_IF_ERROR(f_[kExposed].Signed(&exposed));
    int64_t sum = 0;
    for (uint32_t k = 0; k < stages_; ++k) {
      const size_t at = t * stages_ + k;
      const int64_t leader = series[kLeader][at];
      if (leader < std::numeric_limits<int32_t>::min() ||
          leader > std::numeric_limits<int32_t>::max()) {
        return Bad(absl::StrCat("summary ", i, ": a leader out of range"));
      }
      v1::StageStep* st = s->add_stages();
      st->set_increment_ns(series[kInc][at]);
      st->set_leader(static_cast<int32_t>(leader));
      st->set_margin_ns(series[kMargin][at]);
      st->set_baseline_ns(series[kBaseline][at]);
      st->set_excess_ns(Add(series[kExcessField][at], Sub(series[kInc][at], series[kBaseline][at])));
      st->set_mean_ns(series[kMean][at]);
      st->set_max_ns(series[kMax][at]);
      sum = Add(sum, series[kInc][at]);
    }
    s->set_exposed_ns(Add(exposed, sum));
    return absl::OkStatus();
  }

  // The first stage with excess: 0 for none, an index into the names seen so far, or the next
  // index with the new name in the names column.
  absl::Status ReadFirstExcess(uint64_t i, v1::StepSummary* s) {
    uint64_t v = 0;
    SF_RETURN_IF_ERROR(f_[kFirstExcess].Varint(&v));
    if (v > names_.size() + 1) return Bad(absl::StrCat("summary ", i, ": name index ", v));
    if (v == names_.size() + 1) {
      uint64_t len = 0;
      absl::string_view name;
      SF_RETURN_IF_ERROR(f_[kNames].Varint(&len));
      SF_RETURN_IF_ERROR(f_[kNames].Bytes(len, &name));
      if (name.empty()) return Bad(absl::StrCat("summary ", i, ": an empty stage name"));
      names_.emplace_back(name);
    }
    if (v > 0) s->set_first_excess_stage(names_[v - 1]);
    return absl::OkStatus();
  }

  const uint32_t stages_;
  FrontierColumns& f_;
  std::vector<std::string> names_;
  int64_t last_step_ = -1;
};

absl::Status DecodeFrames(const std::string& frontier, const std::string& detail,
                          std::vector<v1::StepSummary>* out) {
  ColumnReader params(frontier, kFormat, "parameters");
  uint64_t stages = 0, count = 0;
  SF_RETURN_IF_ERROR(params.Varint(&stages));
  SF_RETURN_IF_ERROR(params.Varint(&count));
  if (stages == 0 || stages > shm::v1::kMaxStages) {
    return Bad(absl::StrCat(stages, " stages (1..", shm::v1::kMaxStages, ")"));
  }
  if (count == 0 || count > kMaxSummaryBlockSteps) {
    return Bad(absl::StrCat(count, " steps (1..", kMaxSummaryBlockSteps, ")"));
  }
  FrontierColumns f;
  SF_RETURN_IF_ERROR(archive::SplitColumns(
      absl::string_view(frontier).substr(frontier.size() - params.left()), kFrontierNames,
      kFormat, f));
  DetailColumns d;
  SF_RETURN_IF_ERROR(archive::SplitColumns(detail, kDetailNames, kFormat, d));
  if (f[kKinds].left() != count) {
    return Bad(absl::StrCat(f[kKinds].left(), " kinds for ", count, " steps"));
  }
  absl::string_view kinds;
  SF_RETURN_IF_ERROR(f[kKinds].Bytes(count, &kinds));
  size_t n = 0;
  for (char k : kinds) {
    if (k != kColumns && k != kWhole) return Bad(absl::StrCat("unknown kind ", int{k}));
    n += k == kColumns;
  }
  StageFields series;
  SF_RETURN_IF_ERROR(ReadStageFields(f, d, n, static_cast<uint32_t>(stages), &series));
  std::vector<v1::StepSummary> decoded;
  SF_RETURN_IF_ERROR(
      FrameDecoder(static_cast<uint32_t>(stages), f).Decode(kinds, series, &decoded));
  for (ColumnReader& c : f) SF_RETURN_IF_ERROR(c.Done());
  for (ColumnReader& c : d) SF_RETURN_IF_ERROR(c.Done());
  for (v1::StepSummary& s : decoded) out->push_back(std::move(s));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> EncodeSummaryBlock(std::span<const v1::StepSummary> summaries,
                                               const SummaryBlockOptions& options,
                                               SummaryBlockStats* stats) {
  SummaryBlockStats local;
  if (stats == nullptr) stats = &local;
  *stats = {};
  if (options.stage_count == 0 || options.stage_count > shm::v1::kMaxStages) {
    return Bad(absl::StrCat(options.stage_count, " stages (1..", shm::v1::kMaxStages, ")"));
  }
  if (summaries.empty() || summaries.size() > kMaxSummaryBlockSteps) {
    return Bad(absl::StrCat(summaries.size(), " steps (1..", kMaxSummaryBlockSteps, ")"));
  }
  Encoder encoder(options.stage_count);
  for (const v1::StepSummary& s : summaries) encoder.Add(s, stats);
  stats->steps = summaries.size();
  auto [frontier, detail] = encoder.Content(summaries.size());
  if (frontier.size() > kMaxSummaryBlockRawBytes || detail.size() > kMaxSummaryBlockRawBytes) {
    return Bad(absl::StrCat("over ", kMaxSummaryBlockRawBytes, " bytes of columns: use fewer steps"));
  }
  std::string frame;
  SF_RETURN_IF_ERROR(archive::AppendZstdFrame(frontier, options.zstd_level, kFormat, &frame));
  std::string block;
  block.push_back(static_cast<char>(kSummaryBlockVersion));
  PutVarint(block, frontier.size());
  PutVarint(block, frame.size());
  block.append(frame);
  stats->frontier_bytes = block.size();
  PutVarint(block, detail.size());
  SF_RETURN_IF_ERROR(archive::AppendZstdFrame(detail, options.zstd_level, kFormat, &block));
  stats->block_bytes = block.size();
  stats->detail_bytes = block.size() - stats->frontier_bytes;
  return block;
}

absl::Status DecodeSummaryBlock(absl::string_view block, std::vector<v1::StepSummary>* out) {
  if (block.empty()) return Bad("empty");
  const uint8_t version = static_cast<uint8_t>(block[0]);
  if (version > kSummaryBlockVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "summary block version ", int{version}, " is newer than the versions this build reads (1..",
        int{kSummaryBlockVersion}, "): upgrade"));
  }
  if (version == 0) return Bad("version 0 does not exist");
  const char* p = block.data() + 1;
  const char* end = block.data() + block.size();
  uint64_t frontier_raw = 0, frontier_frame = 0, detail_raw = 0;
  if (!wire::GetVarint(p, end, &frontier_raw) || !wire::GetVarint(p, end, &frontier_frame) ||
      frontier_frame > static_cast<uint64_t>(end - p)) {
    return Bad("cut short in its header");
  }
  const absl::string_view first(p, frontier_frame);
  p += frontier_frame;
  if (!wire::GetVarint(p, end, &detail_raw)) return Bad("cut short before its detail frame");
  if (frontier_raw > kMaxSummaryBlockRawBytes || detail_raw > kMaxSummaryBlockRawBytes) {
    return Bad(absl::StrCat("a frame over ", kMaxSummaryBlockRawBytes, " bytes"));
  }
  absl::StatusOr<std::string> frontier = archive::DecompressZstdFrame(first, frontier_raw, kFormat);
  if (!frontier.ok()) return frontier.status();
  absl::StatusOr<std::string> detail = archive::DecompressZstdFrame(
      absl::string_view(p, static_cast<size_t>(end - p)), detail_raw, kFormat);
  if (!detail.ok()) return detail.status();
  return DecodeFrames(*frontier, *detail, out);
}

}  // namespace stagefrontier
