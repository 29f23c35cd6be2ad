// The suspects of a verdict: the largest excess cells with their share and what-if, and the
// reorderings the later steps make when evidence names another cell first.
//
//   std::vector<Suspect> s = TopSuspects(table, members, what_if);
//   PromoteSuspect(&s, SuspectOf(table, members, table.Index(2, 5), what_if));
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_SUSPECTS_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_SUSPECTS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "daemon/accounting/excess_table.h"
#include "daemon/accounting/group_members.h"
#include "daemon/accounting/verdict.h"

namespace stagefrontier {

inline constexpr size_t kMaxSuspects = 5;

// The what-if saving of (stage, member); see what_if.h.
using WhatIfFn = std::function<int64_t(int stage, int member)>;

Suspect SuspectOf(const ExcessTable& table, const GroupMembers& members, size_t cell,
                  const WhatIfFn& what_if);

// The first kMaxSuspects cells of table.order.
std::vector<Suspect> TopSuspects(const ExcessTable& table, const GroupMembers& members,
                                 const WhatIfFn& what_if);

// Makes `s` the first suspect: moved to the front if listed, else inserted (the last dropped
// beyond kMaxSuspects).
void PromoteSuspect(std::vector<Suspect>* suspects, const Suspect& s);

// Moves (stage, rank) to the front if listed; otherwise leaves the order alone.
void LeadWith(std::vector<Suspect>* suspects, int stage, int32_t rank);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_SUSPECTS_H_
