#include "daemon/accounting/excess_table.h"

#include <algorithm>

namespace stagefrontier {

ExcessTable BuildExcessTable(const AccountingWindow& window, const GroupMembers& members) {
  ExcessTable t;
  const int n = window.members();
  t.stages = window.stages();
  t.members = n;
  const size_t cells = static_cast<size_t>(t.stages) * n;
  t.cell.assign(cells, 0.0);
  t.cell_steps.assign(cells, 0);
  t.stage_total.assign(t.stages, 0.0);
  t.stage_unresolved.assign(t.stages, 0.0);
  std::vector<int64_t> cell_last_step(cells, -1);
  for (size_t i = 0; i < window.size(); ++i) {
    const StepAccounting& acc = window.at(i).accounting;
    t.exposed_ns += acc.exposed_ns;
    if (acc.partial) ++t.partial_steps;
    if (!acc.attributions.empty()) ++t.flagged_steps;
    for (const Attribution& a : acc.attributions) {
      const double each = static_cast<double>(a.excess_ns) / static_cast<double>(a.ranks.size());
      for (int32_t rank : a.ranks) {
        const size_t c = t.Index(a.stage, members.MemberOf(rank));
        t.cell[c] += each;
        if (cell_last_step[c] != acc.step) {
          cell_last_step[c] = acc.step;
          ++t.cell_steps[c];
        }
      }
      t.stage_total[a.stage] += static_cast<double>(a.excess_ns);
      if (a.kind == AttributionKind::kMixedUnresolved) {
        t.stage_unresolved[a.stage] += static_cast<double>(a.excess_ns);
      }
      t.total += static_cast<double>(a.excess_ns);
    }
  }
  for (size_t c = 0; c < cells; ++c) {
    if (t.cell[c] > 0) t.order.push_back(c);
  }
  std::sort(t.order.begin(), t.order.end(), [&](size_t a, size_t b) {
    return t.cell[a] != t.cell[b] ? t.cell[a] > t.cell[b] : a < b;
  });
  return t;
}

std::vector<ExcessCell> ExcessCells(const ExcessTable& table, const GroupMembers& members) {
  std::vector<ExcessCell> out;
  for (size_t i = 0; i < table.order.size() && i < kMaxExcessCells; ++i) {
    const size_t c = table.order[i];
    out.push_back({table.StageOf(c), members.ranks[table.MemberOf(c)],
                   static_cast<int64_t>(table.cell[c]), table.cell_steps[c]});
  }
  return out;
}

}  // namespace stagefrontier
