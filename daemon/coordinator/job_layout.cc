#include "daemon/coordinator/job_layout.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace stagefrontier {

namespace {

// At most this many ranks named in an error (a 16,384-rank job must not print them all).
constexpr size_t kRanksNamed = 8;

std::string RankList(const std::vector<int32_t>& ranks) {
  if (ranks.size() <= kRanksNamed) return absl::StrJoin(ranks, ", ");
  std::vector<int32_t> first(ranks.begin(), ranks.begin() + kRanksNamed);
  return absl::StrCat(absl::StrJoin(first, ", "), " and ", ranks.size() - kRanksNamed, " more");
}

absl::Status Refuse(const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("layout not used: ", why));
}

}  // namespace

bool SameShape(const DeclaredLayout& a, const DeclaredLayout& reference) {
  if (a.state != reference.state) return false;
  if (a.state != DeclaredLayout::State::kDeclared) return true;
  return a.pipeline_stages == reference.pipeline_stages && a.tensor_size == reference.tensor_size &&
         a.pipeline_stage >= 0 && a.pipeline_stage < a.pipeline_stages && a.tensor_rank >= 0 &&
         a.tensor_rank < a.tensor_size;
}

namespace {

// The declared ranks' sizes and coordinates, against the first declared rank's.
absl::Status CheckSizes(std::span<const DeclaredLayout> by_rank,
                        const std::vector<int32_t>& declared) {
  const DeclaredLayout& first = by_rank[declared.front()];
  std::vector<int32_t> differ, outside;
  for (int32_t r : declared) {
    const DeclaredLayout& l = by_rank[r];
    if (l.pipeline_stages != first.pipeline_stages || l.tensor_size != first.tensor_size) {
      differ.push_back(r);
    } else if (!SameShape(l, first)) {
      outside.push_back(r);
    }
  }
  if (!differ.empty()) {
    return Refuse(absl::StrCat("rank ", declared.front(), " declared ", first.pipeline_stages,
                               " pipeline stages x tensor size ", first.tensor_size, ", ranks ",
                               RankList(differ), " other sizes"));
  }
  if (first.pipeline_stages < 1 || first.tensor_size < 1) {
    return Refuse(absl::StrCat("ranks declared ", first.pipeline_stages,
                               " pipeline stages x tensor size ", first.tensor_size,
                               " (both must be at least 1)"));
  }
  if (!outside.empty()) {
    return Refuse(absl::StrCat("ranks ", RankList(outside),
                               " declared a pipeline stage or tensor rank outside the sizes ",
                               first.pipeline_stages, " x ", first.tensor_size));
  }
  const int64_t roles = int64_t{first.pipeline_stages} * first.tensor_size;
  const int64_t world = static_cast<int64_t>(by_rank.size());
  if (roles > world || world % roles != 0) {
    return Refuse(absl::StrCat(first.pipeline_stages, " pipeline stages x tensor size ",
                               first.tensor_size, " do not divide the world of ", world, " ranks"));
  }
  return absl::OkStatus();
}

// Every rank declared, with fitting sizes: one group per role, each with world / roles ranks.
absl::StatusOr<LayoutGroups> RoleGroups(std::span<const DeclaredLayout> by_rank) {
  const DeclaredLayout& first = by_rank.front();
  const int64_t roles = int64_t{first.pipeline_stages} * first.tensor_size;
  std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> by_role;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    by_role[{by_rank[r].pipeline_stage, by_rank[r].tensor_rank}].push_back(static_cast<int32_t>(r));
  }
  const size_t replicas = by_rank.size() / static_cast<size_t>(roles);
  for (int32_t s = 0; s < first.pipeline_stages; ++s) {
    for (int32_t t = 0; t < first.tensor_size; ++t) {
      auto it = by_role.find({s, t});
      const size_t n = it == by_role.end() ? 0 : it->second.size();
      if (n != replicas) {
        return Refuse(
            absl::StrCat("pipeline stage ", s, " tensor rank ", t, " has ", n, " ranks",
                         n > 0 ? absl::StrCat(" (", RankList(it->second), ")") : std::string(),
                         ", every role must have ", replicas, " (the world / ", roles, ")"));
      }
    }
  }
  LayoutGroups out;
  if (roles == 1) return out;  // one role: one group, as without a layout
  for (auto& [role, ranks] : by_role) {
    out.names.push_back(first.tensor_size == 1
                            ? absl::StrCat("pp", role.first)
                            : absl::StrCat("pp", role.first, ".tp", role.second));
    out.groups.push_back(std::move(ranks));
    out.pipeline_stages.push_back(role.first);
  }
  return out;
}

}  // namespace

absl::StatusOr<LayoutGroups> GroupsFromLayout(std::span<const DeclaredLayout> by_rank) {
  using State = DeclaredLayout::State;
  std::vector<int32_t> unknown, none, declared;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    const State state = by_rank[r].state;
    (state == State::kUnknown ? unknown
     : state == State::kNone  ? none
                              : declared)
        .push_back(static_cast<int32_t>(r));
  }
  LayoutGroups out;
  out.pending = !unknown.empty();
  if (declared.empty()) return out;  // nobody declared a layout (yet): one group
  if (!none.empty()) {
    return Refuse(absl::StrCat("ranks ", RankList(declared), " declared a layout, ranks ",
                               RankList(none), " none"));
  }
  if (absl::Status s = CheckSizes(by_rank, declared); !s.ok()) return s;
  if (out.pending) return out;
  return RoleGroups(by_rank);
}

}  // namespace stagefrontier
