#include "daemon/accounting/probe_bracketing.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/common/duration_format.h"
#include "shm/segment_layout_v2.h"

namespace stagefrontier {
namespace {

using shm::v2::kCollectiveOpNames;
constexpr size_t kOps = shm::v2::kOpCount;

}  // namespace

ProbeBracketing::ProbeBracketing(const StageSchema& schema, int32_t world_size,
                                 int64_t tolerance_ns)
    : schema_(schema),
      world_size_(world_size),
      tolerance_ns_(tolerance_ns),
      allowed_(kOps + 1, std::vector<uint8_t>(schema.size(), 0)),
      has_rule_(kOps + 1, 0),
      cells_(schema.size() * static_cast<size_t>(std::max(world_size, 0))),
      stage_checked_(schema.size(), 0),
      stage_violations_(schema.size(), 0) {
  for (size_t k = 0; k < schema.size(); ++k) {
    if (schema.IsWait(k)) allowed_[kOps][k] = 1;
    for (int32_t r = 0; r < world_size; ++r) {
      BracketFinding& f = cells_[k * world_size + r];
      f.stage = static_cast<int32_t>(k);
      f.rank = r;
    }
  }
}

absl::StatusOr<ProbeBracketing> ProbeBracketing::Create(const StageSchema& schema,
                                                        int32_t world_size,
                                                        const std::string& rules,
                                                        int64_t tolerance_ns) {
  if (world_size <= 0) return absl::InvalidArgumentError("world size must be positive");
  if (tolerance_ns < 0) return absl::InvalidArgumentError("tolerance must not be negative");
  ProbeBracketing b(schema, world_size, tolerance_ns);
  for (absl::string_view rule : absl::StrSplit(rules, ',', absl::SkipWhitespace())) {
    rule = absl::StripAsciiWhitespace(rule);
    const std::vector<absl::string_view> parts = absl::StrSplit(rule, ':');
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bracketing rule \"", rule, "\" is not op:stage|stage"));
    }
    size_t op = kOps;
    if (parts[0] != "*") {
      op = std::find(kCollectiveOpNames, kCollectiveOpNames + kOps, parts[0]) - kCollectiveOpNames;
      if (op == kOps) {
        return absl::InvalidArgumentError(
            absl::StrCat("bracketing rule \"", rule, "\": unknown operation \"", parts[0],
                         "\" (one of ", absl::StrJoin(kCollectiveOpNames, ", "), ", *)"));
      }
    }
    std::vector<uint8_t>& row = b.allowed_[op];
    if (!b.has_rule_[op]) std::fill(row.begin(), row.end(), 0);
    b.has_rule_[op] = 1;
    for (absl::string_view name : absl::StrSplit(parts[1], '|')) {
      std::optional<size_t> k = schema.Find(name);
      if (!k) {
        return absl::InvalidArgumentError(absl::StrCat("bracketing rule \"", rule,
                                                       "\": the schema has no stage \"", name,
                                                       "\" (", schema.ToString(), ")"));
      }
      row[*k] = 1;
    }
  }
  return b;
}

absl::Status ProbeBracketing::CheckRules(const std::string& rules) {
  // Any stage the rules name exists in a schema made of exactly those stages.
  std::vector<Stage> stages;
  for (absl::string_view rule : absl::StrSplit(rules, ',', absl::SkipWhitespace())) {
    const std::vector<absl::string_view> parts =
        absl::StrSplit(absl::StripAsciiWhitespace(rule), ':');
    if (parts.size() != 2) continue;  // Create names the malformed rule
    for (absl::string_view name : absl::StrSplit(parts[1], '|')) {
      const bool known = std::any_of(stages.begin(), stages.end(),
                                     [&](const Stage& st) { return st.name == name; });
      if (!known && !name.empty()) stages.push_back(Stage{std::string(name), StageKind::kSync});
    }
  }
  if (stages.empty()) stages.push_back(Stage{"any", StageKind::kSync});
  absl::StatusOr<StageSchema> schema = StageSchema::Create(std::move(stages));
  if (!schema.ok()) return schema.status();
  return Create(*schema, 1, rules).status();
}

bool ProbeBracketing::Allowed(uint16_t op, uint32_t stage) const {
  const size_t row = op < kOps && has_rule_[op] ? op : kOps;
  return stage < schema_.size() && allowed_[row][stage] != 0;
}

bool ProbeBracketing::Bracketed(const RankStep& record, const ProbeSpan& span) const {
  const std::vector<int64_t>& b = record.boundaries_ns;
  for (size_t k = 0; k < schema_.size(); ++k) {
    if (Allowed(span.op, static_cast<uint32_t>(k)) && span.enter_ns >= b[k] - tolerance_ns_ &&
        span.exit_ns <= b[k + 1] + tolerance_ns_) {
      return true;
    }
  }
  return false;
}

void ProbeBracketing::Check(int64_t step, const RankStep& record) {
  if (record.rank < 0 || record.rank >= world_size_) return;
  for (const ProbeSpan& span : record.probe) {
    if (span.stage >= schema_.size()) continue;
    BracketFinding& f = cells_[span.stage * static_cast<size_t>(world_size_) + record.rank];
    ++f.checked;
    ++checked_;
    ++stage_checked_[span.stage];
    if (Bracketed(record, span)) continue;
    ++f.violations;
    ++violations_;
    ++stage_violations_[span.stage];
    f.last_violation_step = step;
    if (!Allowed(span.op, span.stage)) {
      f.stage_not_allowed = true;
    } else {
      const int64_t overrun = std::max(span.exit_ns - record.boundaries_ns[span.stage + 1],
                                       record.boundaries_ns[span.stage] - span.enter_ns);
      f.max_overrun_ns = std::max(f.max_overrun_ns, overrun);
    }
  }
}

std::vector<BracketFinding> ProbeBracketing::Findings() const {
  std::vector<BracketFinding> out;
  for (const BracketFinding& cell : cells_) {
    if (cell.checked == 0) continue;
    BracketFinding f = cell;
    const std::string& stage = schema_.stage(f.stage).name;
    if (f.violations > 0 && f.stage_not_allowed) {
      f.explanation = absl::StrFormat(
          "rank %d: %u of %u collectives issued in \"%s\" lie in no stage allowed for them "
          "(%s): the stage marks do not bracket the collectives. Fix: mark the stage that "
          "contains them, or allow the stage with --probe-bracket",
          f.rank, f.violations, f.checked, stage, DescribeRules());
    } else if (f.violations > 0) {
      f.explanation = absl::StrFormat(
          "rank %d: %u of %u collectives issued in \"%s\" were still running when the stage was "
          "marked finished (by up to %s): the stage marks run ahead of the GPU. Fix: "
          "synchronize the stream before marking, or let the probe define the boundary",
          f.rank, f.violations, f.checked, stage, FormatMs(f.max_overrun_ns));
    }
    out.push_back(std::move(f));
  }
  std::stable_sort(out.begin(), out.end(), [](const BracketFinding& a, const BracketFinding& b) {
    return a.violations > b.violations;
  });
  return out;
}

std::string ProbeBracketing::DescribeRules() const {
  std::vector<std::string> parts;
  auto stages_of = [&](size_t row) {
    std::vector<std::string> names;
    for (size_t k = 0; k < schema_.size(); ++k) {
      if (allowed_[row][k]) names.push_back(schema_.stage(k).name);
    }
    return names.empty() ? std::string("no stage") : absl::StrJoin(names, "|");
  };
  for (size_t op = 0; op < kOps; ++op) {
    if (has_rule_[op]) parts.push_back(absl::StrCat(kCollectiveOpNames[op], ":", stages_of(op)));
  }
  parts.push_back(absl::StrCat("*:", stages_of(kOps)));
  return absl::StrJoin(parts, ", ");
}

}  // namespace stagefrontier
