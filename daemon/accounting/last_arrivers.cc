#include "daemon/accounting/last_arrivers.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace stagefrontier {

bool LastArrivers::HasProbe(int stage) const {
  for (size_t i = 0; i < window_.size(); ++i) {
    for (int m = 0; m < window_.members(); ++m) {
      if (window_.present(i, m) && window_.probe_wait(i, m, stage) >= 0) return true;
    }
  }
  return false;
}

ProbeArrival LastArrivers::ProbeLastArriver(int k, const std::vector<int>& candidates) const {
  ProbeArrival out;
  int stage = k;
  if (!HasProbe(stage)) {
    std::optional<size_t> next = schema_.NextWaitStage(static_cast<size_t>(k));
    if (!next || !HasProbe(static_cast<int>(*next))) return out;
    stage = static_cast<int>(*next);
  }
  out.at_stage = stage;
  const std::vector<int32_t>& wait_group = members_.wait_group;
  std::vector<int> wins(window_.members(), 0);
  for (size_t i = 0; i < window_.size(); ++i) {
    // The single shortest wait among the candidates' sync group, if every candidate was seen.
    bool complete = true;
    for (int c : candidates) complete = complete && window_.probe_wait(i, c, stage) >= 0;
    if (!complete) continue;
    const int32_t group = wait_group[candidates.front()];
    int best = -1;
    int64_t shortest = std::numeric_limits<int64_t>::max();
    int64_t second = std::numeric_limits<int64_t>::max();
    for (int m = 0; m < window_.members(); ++m) {
      const int64_t w = window_.present(i, m) ? window_.probe_wait(i, m, stage) : -1;
      if (w < 0 || wait_group[m] != group) continue;
      if (w < shortest) {
        second = shortest;
        shortest = w;
        best = m;
      } else if (w < second) {
        second = w;
      }
    }
    ++out.evidence;
    if (best >= 0 && second > shortest) ++wins[best];
  }
  int winner = -1;
  for (int c : candidates) {
    if (winner < 0 || wins[c] > wins[winner]) winner = c;
  }
  if (winner < 0 || out.evidence < std::max(3, config_.min_flagged_steps)) return out;
  out.steps = wins[winner];
  if (3 * wins[winner] >= 2 * out.evidence) out.member = winner;
  return out;
}

void LastArrivers::LateSet(size_t i, int k, int member, std::vector<int32_t>* out) const {
  out->clear();
  const WindowStep& step = window_.at(i);
  const StageAccounting& s = step.accounting.stages[k];
  const int64_t tol = static_cast<int64_t>(config_.tie_z * static_cast<double>(s.peer_noise_ns));
  const std::vector<int32_t>& wait_group = members_.wait_group;
  const int32_t group = wait_group[member];
  const size_t stages = static_cast<size_t>(window_.stages());
  const int64_t* durations = step.durations.data() + k;
  // One pass (a window's close asks up to once a step; 100,000 members each): every member
  // within tol of the shortest wait so far, in member order, is a superset of those within tol
  // of the shortest; then those past it go.
  int64_t shortest = std::numeric_limits<int64_t>::max();
  for (int m = 0; m < window_.members(); ++m) {
    if (wait_group[m] != group || step.present[m] == 0) continue;
    const int64_t d = durations[static_cast<size_t>(m) * stages];
    shortest = std::min(shortest, d);
    if (d <= shortest + tol) out->push_back(m);
  }
  std::erase_if(
      *out, [&](int32_t m) { return durations[static_cast<size_t>(m) * stages] > shortest + tol; });
}

}  // namespace stagefrontier
