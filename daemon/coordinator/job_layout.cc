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

absl::StatusOr<LayoutGroups> GroupsFromLayout(std::span<const DeclaredLayout> by_rank) {
  using State = DeclaredLayout::State;
  std::vector<int32_t> unknown, none, declared;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    const int32_t rank = static_cast<int32_t>(r);
    switch (by_rank[r].state) {
      case State::kUnknown:
        unknown.push_back(rank);
        break;
      case State::kNone:
        none.push_back(rank);
        break;
      case State::kDeclared:
        declared.push_back(rank);
        break;
    }
  }
  LayoutGroups out;
  if (declared.empty()) {
    out.pending = !unknown.empty();
    return out;  // nobody declared a layout (yet): one group
  }
  if (!none.empty()) {
    return Refuse(absl::StrCat("ranks ", RankList(declared), " declared a layout, ranks ",
                               RankList(none), " none"));
  }
  const DeclaredLayout& first = by_rank[declared.front()];
  std::vector<int32_t> differ, outside;
  for (int32_t r : declared) {
    const DeclaredLayout& l = by_rank[r];
    if (l.pipeline_stages != first.pipeline_stages || l.tensor_size != first.tensor_size) {
      differ.push_back(r);
    } else if (l.pipeline_stage < 0 || l.pipeline_stage >= l.pipeline_stages || l.tensor_rank < 0 ||
               l.tensor_rank >= l.tensor_size) {
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
  if (!unknown.empty()) {
    out.pending = true;
    return out;
  }
  std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> by_role;
  for (int32_t r : declared) {
    by_role[{by_rank[r].pipeline_stage, by_rank[r].tensor_rank}].push_back(r);
  }
  const size_t replicas = static_cast<size_t>(world / roles);
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
  if (roles == 1) return out;  // one role: one group, as without a layout
  for (auto& [role, ranks] : by_role) {
    out.names.push_back(first.tensor_size == 1
                            ? absl::StrCat("pp", role.first)
                            : absl::StrCat("pp", role.first, ".tp", role.second));
    out.groups.push_back(std::move(ranks));
  }
  return out;
}

}  // namespace stagefrontier
