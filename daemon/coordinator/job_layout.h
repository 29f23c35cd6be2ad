// A job's sync groups from the layout its ranks declared (proto RankLayout): ranks with the same
// (pipeline stage, tensor rank) do the same work, so they are one group: compared with each
// other, and synchronized by the job's data-parallel stages. A job whose ranks declare nothing
// is one group, as before layouts existed.
//
//   std::vector<DeclaredLayout> by_rank(world_size);        // kUnknown until a rank declares
//   by_rank[r] = DeclaredLayout::Of(2, 1, 0, 1);             // pipeline stage 1 of 2
//   absl::StatusOr<LayoutGroups> g = GroupsFromLayout(by_rank);
//   if (!g.ok()) fall_back_to_one_group(g.status().message());  // names the ranks
//   else if (g->pending) keep_waiting();  // some rank has not declared yet
//   else engine_config.groups = g->groups;                   // empty: one group
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_JOB_LAYOUT_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_JOB_LAYOUT_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace stagefrontier {

struct DeclaredLayout {
  enum class State : uint8_t { kUnknown = 0, kNone = 1, kDeclared = 2 };
  State state = State::kUnknown;  // kUnknown: the rank has not declared itself yet
  int32_t pipeline_stage = 0;
  int32_t pipeline_stages = 0;
  int32_t tensor_rank = 0;
  int32_t tensor_size = 0;

  static DeclaredLayout None() { return {.state = State::kNone}; }
  static DeclaredLayout Of(int32_t pipeline_stages, int32_t pipeline_stage, int32_t tensor_rank,
                           int32_t tensor_size) {
    return {.state = State::kDeclared,
            .pipeline_stage = pipeline_stage,
            .pipeline_stages = pipeline_stages,
            .tensor_rank = tensor_rank,
            .tensor_size = tensor_size};
  }
  bool operator==(const DeclaredLayout&) const = default;
};

struct LayoutGroups {
  // True while some rank has not declared (and no rank contradicts another yet): keep the
  // groups as they are.
  bool pending = false;
  // One per role, in (pipeline stage, tensor rank) order, each sorted; empty: one group.
  std::vector<std::vector<int32_t>> groups;
  std::vector<std::string> names;        // "pp1", or "pp1.tp0" with tensor parallelism
  std::vector<int32_t> pipeline_stages;  // each group's pipeline stage
};

// Whether `a` could sit in the same job as `reference` (both none, or both declared with the
// same sizes and `a`'s coordinates inside them): a declaration that does cannot change what
// GroupsFromLayout says while other ranks are still to declare. O(1).
bool SameShape(const DeclaredLayout& a, const DeclaredLayout& reference);

// The groups, or InvalidArgument naming the ranks when the declarations do not fit together:
// some ranks declared a layout and others none, the ranks disagree on the pipeline or tensor
// size, a coordinate is out of range, the sizes do not divide the world, or a role has more or
// fewer ranks than the others.
absl::StatusOr<LayoutGroups> GroupsFromLayout(std::span<const DeclaredLayout> by_rank);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_JOB_LAYOUT_H_
