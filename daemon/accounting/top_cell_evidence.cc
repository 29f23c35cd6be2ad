#include "daemon/accounting/top_cell_evidence.h"

#include <algorithm>
#include <optional>

#include "daemon/accounting/next_wait.h"
#include "daemon/accounting/robust_stats.h"

namespace stagefrontier {
namespace {

// Counts of the wait evidence: steps where the next wait could say who arrived last, and
// those where it agreed the top rank was the sole last arriver.
struct WaitTally {
  int32_t agree = 0;
  int32_t evidence = 0;
};

// A frontier-leader charge in window step i: does the next wait (this step's, or the next
// step's first for a stage after the last wait) show the top member alone arriving last?
void CheckNextWait(const AccountingWindow& window, const StageSchema& schema,
                   const GroupMembers& members, const LastArrivers& arrivers, size_t i, CellRef top,
                   WaitTally* tally, std::vector<int32_t>* late,
                   std::map<int32_t, int32_t>* also_late) {
  const std::optional<WaitAt> wait = WaitAfter(window, schema, i, top.stage);
  if (!wait || !window.present(wait->index, top.member)) return;
  arrivers.LateSet(wait->index, static_cast<int>(wait->stage), top.member, late);
  ++tally->evidence;
  if (late->size() == 1 && (*late)[0] == top.member) {
    ++tally->agree;
    return;
  }
  for (int32_t m : *late) {
    if (m != top.member) ++(*also_late)[members.ranks[m]];
  }
}

}  // namespace

TopCellEvidence GatherTopCellEvidence(const AccountingWindow& window, const StageSchema& schema,
                                      const GroupMembers& members, const EngineConfig& config,
                                      const LastArrivers& arrivers, CellRef top) {
  TopCellEvidence e;
  const int32_t rank = members.ranks[top.member];
  std::vector<int64_t> margins;
  std::vector<int64_t> noise;
  std::vector<int32_t> late;
  WaitTally tally;
  for (size_t i = 0; i < window.size(); ++i) {
    const StepAccounting& acc = window.at(i).accounting;
    noise.push_back(acc.stages[top.stage].peer_noise_ns);
    for (const Attribution& a : acc.attributions) {
      if (a.stage != top.stage || std::find(a.ranks.begin(), a.ranks.end(), rank) == a.ranks.end())
        continue;
      margins.push_back(a.margin_ns);
      if (e.steps_to_profile.size() < 5 &&
          (e.steps_to_profile.empty() || e.steps_to_profile.back() != acc.step)) {
        e.steps_to_profile.push_back(acc.step);
      }
      for (int32_t other : a.ranks) {
        if (other != rank) ++e.tied_with[other];
      }
      if (a.kind == AttributionKind::kCarryOver || a.kind == AttributionKind::kLateStart) {
        ++tally.agree;
        ++tally.evidence;
        continue;
      }
      if (a.kind != AttributionKind::kFrontierLeader) continue;
      CheckNextWait(window, schema, members, arrivers, i, top, &tally, &late, &e.also_late);
    }
  }
  e.median_margin_ns = MedianInPlace(margins);
  e.tie_tolerance_ns =
      static_cast<int64_t>(config.tie_z * static_cast<double>(MedianInPlace(noise)));
  e.wait_agreement = tally.evidence > 0 ? static_cast<double>(tally.agree) / tally.evidence : -1.0;
  return e;
}

Rivals FindRivals(const ExcessTable& table, const RankSupport& support, const StageSchema& schema,
                  const EngineConfig& config, const GroupMembers& members, CellRef top) {
  Rivals r;
  const size_t top_cell = table.Index(top.stage, top.member);
  // Co-leaders in the same stage.
  for (int m = 0; m < table.members; ++m) {
    if (table.cell[table.Index(top.stage, m)] >= config.tie_ratio * table.cell[top_cell] &&
        (m == top.member || support.Supported(top.stage, m)))
      r.co_leaders.push_back(members.ranks[m]);
  }
  // Other large candidates anywhere.
  for (size_t c : table.order) {
    // The same rank's late arrival at a wait is the same fault seen from the other side.
    const bool same_fault =
        table.MemberOf(c) == top.member && schema.IsWait(static_cast<size_t>(table.StageOf(c)));
    if (c != top_cell && table.Share(c) >= config.split_share && !same_fault &&
        support.Supported(table.StageOf(c), table.MemberOf(c)))
      r.large.push_back(c);
  }
  return r;
}

}  // namespace stagefrontier
