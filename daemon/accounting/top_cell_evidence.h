// Verdict step 5: the evidence about the top cell that the classification weighs: its
// margins over the steps it was charged, the tie tolerance, how often it was the sole last
// arriver at the next wait (and who else was), the ranks it was tied with, and its rivals
// (co-leaders in its stage, other large supported cells).
//
//   TopCellEvidence e = GatherTopCellEvidence(window, schema, members, config, arrivers, top);
//   Rivals r = FindRivals(table, support, schema, config, members, top);
//   if (e.median_margin_ns < e.tie_tolerance_ns) { /* a tie within noise */ }
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_TOP_CELL_EVIDENCE_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_TOP_CELL_EVIDENCE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "daemon/accounting/accounting_window.h"
#include "daemon/accounting/engine_config.h"
#include "daemon/accounting/excess_table.h"
#include "daemon/accounting/group_members.h"
#include "daemon/accounting/last_arrivers.h"
#include "daemon/accounting/rank_evidence.h"
#include "daemon/accounting/top_cell.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

struct TopCellEvidence {
  int64_t median_margin_ns = 0;
  int64_t tie_tolerance_ns = 0;
  double wait_agreement = -1;             // -1: no step gave evidence
  std::map<int32_t, int32_t> tied_with;   // rank -> steps charged together with the top rank
  std::map<int32_t, int32_t> also_late;   // rank -> steps it also arrived late at the next wait
  std::vector<int64_t> steps_to_profile;  // the first (at most 5) steps that charged the cell
};

struct Rivals {
  std::vector<int32_t> co_leaders;  // ranks near the top cell's excess in its stage, itself too
  std::vector<size_t> large;        // other supported cells with a large share, largest first
};

TopCellEvidence GatherTopCellEvidence(const AccountingWindow& window, const StageSchema& schema,
                                      const GroupMembers& members, const EngineConfig& config,
                                      const LastArrivers& arrivers, CellRef top);

Rivals FindRivals(const ExcessTable& table, const RankSupport& support, const StageSchema& schema,
                  const EngineConfig& config, const GroupMembers& members, CellRef top);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_TOP_CELL_EVIDENCE_H_
