#include "daemon/accounting/suspects.h"

#include <algorithm>

namespace stagefrontier {

Suspect SuspectOf(const ExcessTable& table, const GroupMembers& members, size_t cell,
                  const WhatIfFn& what_if) {
  Suspect s;
  s.stage = table.StageOf(cell);
  s.rank = members.ranks[table.MemberOf(cell)];
  s.excess_ns = static_cast<int64_t>(table.cell[cell]);
  s.share = table.cell[cell] / table.total;
  s.flagged_steps = table.cell_steps[cell];
  s.what_if_saving_ns = what_if(s.stage, table.MemberOf(cell));
  return s;
}

std::vector<Suspect> TopSuspects(const ExcessTable& table, const GroupMembers& members,
                                 const WhatIfFn& what_if) {
  std::vector<Suspect> out;
  for (size_t i = 0; i < table.order.size() && i < kMaxSuspects; ++i) {
    out.push_back(SuspectOf(table, members, table.order[i], what_if));
  }
  return out;
}

void LeadWith(std::vector<Suspect>* suspects, int stage, int32_t rank) {
  auto it = std::find_if(suspects->begin(), suspects->end(),
                         [&](const Suspect& x) { return x.stage == stage && x.rank == rank; });
  if (it != suspects->end()) std::rotate(suspects->begin(), it, it + 1);
}

void PromoteSuspect(std::vector<Suspect>* suspects, const Suspect& s) {
  auto it = std::find_if(suspects->begin(), suspects->end(),
                         [&](const Suspect& x) { return x.stage == s.stage && x.rank == s.rank; });
  if (it != suspects->end()) {
    std::rotate(suspects->begin(), it, it + 1);
    return;
  }
  suspects->insert(suspects->begin(), s);
  if (suspects->size() > kMaxSuspects) suspects->pop_back();
}

}  // namespace stagefrontier
