// The ordered stage schema of a job: stage names and their kinds (docs/accounting.md,
// "Stages and their kinds").
//
// A schema is declared once per process and must be identical on every rank of a job.
//
//   absl::StatusOr<StageSchema> schema =
//       StageSchema::Parse("data:io,forward:compute,backward:compute,grad_sync:sync,optimizer:compute");
//   if (!schema.ok()) { /* schema.status() names the offending entry */ }
//   schema->NextWaitStage(0);  // -> 3 (grad_sync)
#ifndef STAGEFRONTIER_SHM_STAGE_SCHEMA_H_
#define STAGEFRONTIER_SHM_STAGE_SCHEMA_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stagefrontier {

// What a stage spends its time on. `sync` is a collective wait; `mixed` is local work that
// also contains a collective wait (e.g. backward with overlapped gradient all-reduce).
// kP2p: a point-to-point transfer with particular other ranks (a pipeline stage's send or
// receive): it waits on those ranks, not on the rank's sync group, so it is accounted as the
// rank's own time, compared with the ranks of the same role, and never read as the group's wait.
// kTensor: work interleaved with collectives over the rank's tensor-parallel group (a
// row- or column-parallel layer's all-reduce): its waits are on the tensor group, not on the
// rank's sync group (its data-parallel replicas), so it is never the group's wait (as kP2p) but
// is the tensor group's own work; the tensor group finishes it together, so a slow one among
// them is named as the group.
enum class StageKind : uint8_t {
  kIo = 0,
  kCompute = 1,
  kSync = 2,
  kMixed = 3,
  kP2p = 4,
  kTensor = 5
};

// Returns "io", "compute", "sync", "mixed", "p2p" or "tensor".
const char* StageKindName(StageKind kind);

// Parses a kind name; fails with InvalidArgument naming the text otherwise.
[[nodiscard]] absl::StatusOr<StageKind> ParseStageKind(absl::string_view text);

struct Stage {
  std::string name;
  StageKind kind = StageKind::kCompute;
  bool operator==(const Stage&) const = default;
};

class StageSchema {
 public:
  static constexpr size_t kMaxStages = 32;

  // Validates and builds a schema: 1..kMaxStages stages, unique names of 1..39 characters
  // from [A-Za-z0-9_.-] (shm/record_limits.h). Fails with InvalidArgument naming the
  // offending stage (escaped: names may come from untrusted input).
  [[nodiscard]] static absl::StatusOr<StageSchema> Create(std::vector<Stage> stages);

  // Parses "name:kind,name:kind,...". Fails with InvalidArgument naming the bad entry.
  [[nodiscard]] static absl::StatusOr<StageSchema> Parse(absl::string_view text);

  size_t size() const { return stages_.size(); }
  const Stage& stage(size_t k) const { return stages_[k]; }
  const std::vector<Stage>& stages() const { return stages_; }

  // True for `sync` and `mixed` stages: the stages in which ranks wait for each other.
  bool IsWait(size_t k) const;
  // True for `io`, `compute` and `tensor` stages: a rank's own work (a tensor stage's: its
  // tensor group's, which the verdict names together). Waits and `p2p` transfers last as long
  // as the others (a receive takes its neighbour's time), so their durations alone never name
  // the rank.
  bool IsWork(size_t k) const;
  // True for `p2p` and `tensor` stages: they wait on ranks outside the rank's sync group (a
  // pipeline neighbour, the tensor group), so they are never the group's wait (a `tensor`
  // stage is still its tensor group's work: IsWork).
  bool WaitsOutsideGroup(size_t k) const;
  // The first wait stage strictly after stage k, if any.
  std::optional<size_t> NextWaitStage(size_t k) const;
  // The first wait stage of the step, if any.
  std::optional<size_t> FirstWaitStage() const;
  // True if stage k runs after the step's last wait stage: its delays surface at the next
  // step's first wait, because ranks measure time from their own step start.
  bool IsTail(size_t k) const;
  // Index of the stage named `name`, if present.
  std::optional<size_t> Find(absl::string_view name) const;

  // "data:io,forward:compute,..."; Parse(ToString()) round-trips.
  std::string ToString() const;

  bool operator==(const StageSchema& other) const { return stages_ == other.stages_; }

 private:
  explicit StageSchema(std::vector<Stage> stages);
  std::vector<Stage> stages_;
  std::optional<size_t> last_wait_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_SHM_STAGE_SCHEMA_H_
