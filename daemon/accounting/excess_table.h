// Verdict step 1: the stage x member table of excess attributed over a window, with the
// window's totals. An excess charged to several ranks is split evenly among them.
//
//   ExcessTable t = BuildExcessTable(window, members);
//   if (!t.order.empty()) top_cell = t.order.front();  // stage = c / n, member = c % n
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_EXCESS_TABLE_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_EXCESS_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/accounting/accounting_window.h"
#include "daemon/accounting/group_members.h"
#include "daemon/accounting/verdict.h"

namespace stagefrontier {

struct ExcessTable {
  int stages = 0;
  int members = 0;
  std::vector<double> cell;         // stage-major: cell[k * members + m]
  std::vector<int32_t> cell_steps;  // steps that charged the cell
  std::vector<double> stage_total;
  std::vector<double> stage_unresolved;  // mixed_unresolved part of stage_total
  double total = 0;
  // Window totals.
  int64_t exposed_ns = 0;
  int32_t partial_steps = 0;
  int32_t flagged_steps = 0;
  // Cells with excess, largest first (ties: lower index first).
  std::vector<size_t> order;

  size_t Index(int stage, int member) const {
    return static_cast<size_t>(stage) * members + member;
  }
  int StageOf(size_t c) const { return static_cast<int>(c / members); }
  int MemberOf(size_t c) const { return static_cast<int>(c % members); }
  double Share(size_t c) const { return cell[c] / total; }
};

ExcessTable BuildExcessTable(const AccountingWindow& window, const GroupMembers& members);

// The heatmap: every cell of `order`, at most kMaxExcessCells.
std::vector<ExcessCell> ExcessCells(const ExcessTable& table, const GroupMembers& members);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_EXCESS_TABLE_H_
