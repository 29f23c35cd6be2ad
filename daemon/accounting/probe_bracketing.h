// Bracketing validation of the collective probe's spans: every collective must lie inside a
// stage that is allowed to contain it, or the stub's stage marks do not tell the truth (on a
// GPU, typically: a stage is marked finished while its collective still runs). Counted per
// (stage the collective was issued in, rank), with a plain explanation and a fix.
//
// Rules are written "op:stage|stage,op:stage", op one of all_reduce, reduce_scatter,
// all_gather, broadcast, reduce, send, recv or "*" (any); an op without a rule may lie in any
// sync or mixed stage, which is also the whole default.
//
//   absl::StatusOr<ProbeBracketing> b =
//       ProbeBracketing::Create(schema, world_size, "all_reduce:grad_sync|backward");
//   b->Check(rank_step);                        // every span of one rank's step
//   for (const BracketFinding& f : b->Findings()) Print(f.explanation);
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_PROBE_BRACKETING_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_PROBE_BRACKETING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/accounting/step_input.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

struct BracketFinding {
  int32_t stage = 0;  // where the collectives were issued
  int32_t rank = 0;
  uint64_t checked = 0;
  uint64_t violations = 0;
  int64_t max_overrun_ns = 0;  // how far past its stage's end a collective ran (worst case)
  int64_t last_violation_step = -1;
  bool stage_not_allowed = false;  // issued in a stage where no collective is expected
  std::string explanation;         // empty when there is no violation
};

class ProbeBracketing {
 public:
  // Tolerance for clock conversion (the CUDA backend's anchor error is well below it).
  static constexpr int64_t kDefaultToleranceNs = 50'000;

  // Fails with InvalidArgument naming an unknown operation or stage, or a malformed rule.
  [[nodiscard]] static absl::StatusOr<ProbeBracketing> Create(
      const StageSchema& schema, int32_t world_size, const std::string& rules,
      int64_t tolerance_ns = kDefaultToleranceNs);

  // Checks the rules' syntax and operation names without a schema (a coordinator flag is
  // checked at start; the stage names only per job). InvalidArgument as Create.
  [[nodiscard]] static absl::Status CheckRules(const std::string& rules);

  // Whether `span` lies inside a stage allowed for its operation (within the tolerance).
  bool Bracketed(const RankStep& record, const ProbeSpan& span) const;
  // Counts every span of one rank's (validated) step.
  void Check(int64_t step, const RankStep& record);

  uint64_t checked() const { return checked_; }
  uint64_t violations() const { return violations_; }
  // Per stage (where the collectives were issued), all ranks together.
  uint64_t stage_checked(size_t k) const { return stage_checked_[k]; }
  uint64_t stage_violations(size_t k) const { return stage_violations_[k]; }
  // One finding per (stage, rank) that saw a collective, violations first.
  std::vector<BracketFinding> Findings() const;
  // "all_reduce:grad_sync|backward, *:sync or mixed stages".
  std::string DescribeRules() const;

 private:
  ProbeBracketing(const StageSchema& schema, int32_t world_size, int64_t tolerance_ns);
  bool Allowed(uint16_t op, uint32_t stage) const;

  StageSchema schema_;
  int32_t world_size_;
  int64_t tolerance_ns_;
  // allowed_[op][stage]; the last row is for ops without a rule ("*").
  std::vector<std::vector<uint8_t>> allowed_;
  std::vector<uint8_t> has_rule_;
  std::vector<BracketFinding> cells_;  // stage-major: stage * world_size + rank
  std::vector<uint64_t> stage_checked_;
  std::vector<uint64_t> stage_violations_;
  uint64_t checked_ = 0;
  uint64_t violations_ = 0;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_PROBE_BRACKETING_H_
