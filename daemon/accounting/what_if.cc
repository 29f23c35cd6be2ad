#include "daemon/accounting/what_if.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "daemon/accounting/frontier.h"
#include "daemon/accounting/next_wait.h"

namespace stagefrontier {
namespace {

// A wait stage's own excess charged to `rank` in window step i (late starts, a slower
// collective): saved whole.
int64_t WaitStageSaving(const StepAccounting& acc, int k, int32_t rank) {
  int64_t saved = 0;
  for (const Attribution& a : acc.attributions) {
    if (a.stage == k && std::find(a.ranks.begin(), a.ranks.end(), rank) != a.ranks.end()) {
      saved += a.excess_ns / static_cast<int64_t>(a.ranks.size());
    }
  }
  return saved;
}

// No wait at all in the schema: the step ends at the frontier.
int64_t NoWaitSaving(const AccountingWindow& window, size_t i, int member, int64_t excess) {
  const StepAccounting& acc = window.at(i).accounting;
  const int last = window.stages() - 1;
  int64_t others = 0;
  for (int m = 0; m < window.members(); ++m) {
    if (m != member && window.present(i, m))
      others = std::max(others, window.cumulative(i, m, last));
  }
  const int64_t mine = window.cumulative(i, member, last) - excess;
  return acc.stages[last].frontier_ns - std::max(mine, others);
}

// Step i's saving for a work stage k.
int64_t WorkStageSaving(const AccountingWindow& window, const StageSchema& schema,
                        const GroupMembers& members, size_t i, int k, int member) {
  const StepAccounting& acc = window.at(i).accounting;
  if (!window.present(i, member)) return 0;
  const int present = window.members() - static_cast<int>(acc.missing_ranks.size());
  const int64_t peer_ns =
      PeerDurationNs(present, acc.stages[k].min_duration_ns, acc.stages[k].median_duration_ns);
  const int64_t excess = window.duration(i, member, k) - peer_ns;
  if (excess <= 0) return 0;
  // The next wait (this step's, or the next step's first for a tail stage) ends when the
  // last rank arrives: behaving like its peers saves this rank's excess, but no more than
  // its lead over the next rank to arrive, measured by their waits on their own clocks.
  // A tail stage's, or one whose later waits in this step waited for nobody, is the next
  // step's first wait.
  if (!schema.FirstWaitStage()) return NoWaitSaving(window, i, member, excess);
  const std::optional<WaitAt> wait = WaitAfter(window, schema, i, k);
  if (!wait) return 0;
  const size_t at = wait->index;
  if (!window.present(at, member)) return 0;
  const int s = static_cast<int>(wait->stage);
  const std::vector<int32_t>& group = members.wait_group;
  int64_t next_wait = std::numeric_limits<int64_t>::max();
  for (int m = 0; m < window.members(); ++m) {
    if (m != member && group[m] == group[member] && window.present(at, m)) {
      next_wait = std::min(next_wait, window.duration(at, m, s));
    }
  }
  if (next_wait == std::numeric_limits<int64_t>::max()) return 0;
  return std::clamp<int64_t>(next_wait - window.duration(at, member, s), 0, excess);
}

}  // namespace

int64_t WhatIfSaving(const AccountingWindow& window, const StageSchema& schema,
                     const GroupMembers& members, int k, int member) {
  const size_t W = window.size();
  if (W == 0) return 0;
  const int32_t rank = members.ranks[member];
  int64_t saved = 0;
  for (size_t i = 0; i < W; ++i) {
    saved += schema.IsWait(static_cast<size_t>(k))
                 ? WaitStageSaving(window.at(i).accounting, k, rank)
                 : WorkStageSaving(window, schema, members, i, k, member);
  }
  return saved / static_cast<int64_t>(W);
}

}  // namespace stagefrontier
