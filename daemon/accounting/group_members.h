// Who is in a rank set: member i is ranks[i]; wait_group[i] names the sync group member i
// waits with. Verdict steps take this instead of the accountant, so each can be tested alone.
//
//   GroupMembers g({4, 7, 9}, /*wait_group=*/{});
//   g.MemberOf(7);  // -> 1
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_MEMBERS_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_MEMBERS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace stagefrontier {

struct GroupMembers {
  // An empty wait_group means one group.
  GroupMembers(std::vector<int32_t> group_ranks, std::vector<int32_t> group_waits)
      : ranks(std::move(group_ranks)),
        wait_group(group_waits.empty() ? std::vector<int32_t>(ranks.size(), 0)
                                       : std::move(group_waits)) {
    const int32_t largest = ranks.empty() ? 0 : *std::max_element(ranks.begin(), ranks.end());
    member_of_rank.assign(static_cast<size_t>(largest) + 1, -1);
    for (size_t i = 0; i < ranks.size(); ++i) member_of_rank[ranks[i]] = static_cast<int32_t>(i);
  }
  int size() const { return static_cast<int>(ranks.size()); }
  // -1 outside the group.
  int MemberOf(int32_t rank) const {
    return rank >= 0 && static_cast<size_t>(rank) < member_of_rank.size() ? member_of_rank[rank]
                                                                          : -1;
  }

  std::vector<int32_t> ranks;
  std::vector<int32_t> wait_group;
  std::vector<int32_t> member_of_rank;  // indexed by rank
};

// The sync group of each rank 0..world_size-1: group_of_rank[r] = g when groups[g] holds r.
// Every rank must be in a group (Engine::Create checks it); empty groups: all zero.
inline std::vector<int32_t> GroupOfRank(const std::vector<std::vector<int32_t>>& groups,
                                        int32_t world_size) {
  std::vector<int32_t> group_of_rank(static_cast<size_t>(world_size), 0);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (int32_t r : groups[g]) group_of_rank[r] = static_cast<int32_t>(g);
  }
  return group_of_rank;
}

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_MEMBERS_H_
