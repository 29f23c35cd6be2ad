#include "daemon/accounting/frontier.h"

#include <algorithm>
#include <limits>

#include "daemon/accounting/robust_stats.h"

namespace stagefrontier {

StepMatrix::StepMatrix(int members, int stages)
    : members_(members),
      stages_(stages),
      present_(members, 0),
      d_(static_cast<size_t>(members) * stages, 0),
      c_(static_cast<size_t>(members) * stages, 0),
      probe_local_(static_cast<size_t>(members) * stages, -1) {}

void StepMatrix::Reset() {
  std::fill(present_.begin(), present_.end(), 0);
  std::fill(probe_local_.begin(), probe_local_.end(), -1);
  present_count_ = 0;
}

void StepMatrix::SetMember(int member, std::span<const int64_t> b) {
  if (!present_[member]) ++present_count_;
  present_[member] = 1;
  int64_t* d = &d_[static_cast<size_t>(member) * stages_];
  int64_t* c = &c_[static_cast<size_t>(member) * stages_];
  for (int k = 0; k < stages_; ++k) {
    d[k] = b[k + 1] - b[k];
    c[k] = b[k + 1] - b[0];
  }
}

void StepMatrix::SetProbeLocal(int member, int stage, int64_t local_ns) {
  probe_local_[static_cast<size_t>(member) * stages_ + stage] = local_ns;
}

void ComputeFrontier(const StepMatrix& m, StepFrontier* out, std::vector<int64_t>* scratch) {
  const int S = m.stages();
  out->stages.assign(S, StageFrontier{});
  out->exposed_ns = 0;
  if (m.present_count() == 0) return;
  int64_t previous_frontier = 0;  // F[0] = 0
  for (int k = 0; k < S; ++k) {
    StageFrontier& s = out->stages[k];
    int64_t best = std::numeric_limits<int64_t>::min();
    int64_t second = std::numeric_limits<int64_t>::min();
    int32_t leader = -1;
    int64_t max_d = std::numeric_limits<int64_t>::min();
    int64_t min_d = std::numeric_limits<int64_t>::max();
    int32_t min_member = -1;
    __int128 sum_d = 0;
    scratch->clear();
    for (int i = 0; i < m.members(); ++i) {
      if (!m.present(i)) continue;
      const int64_t c = m.cumulative(i, k);
      const int64_t d = m.duration(i, k);
      if (c > best) {
        second = best;
        best = c;
        leader = i;
      } else if (c > second) {
        second = c;
      }
      max_d = std::max(max_d, d);
      if (d < min_d) {
        min_d = d;
        min_member = i;
      }
      sum_d += d;
      scratch->push_back(d);
    }
    s.frontier_ns = best;
    s.leader = leader;
    s.margin_ns = m.present_count() > 1 ? best - second : 0;
    s.increment_ns = best - previous_frontier;
    s.mean_duration_ns = static_cast<int64_t>(sum_d / m.present_count());
    s.max_duration_ns = max_d;
    s.min_duration_ns = min_d;
    s.min_member = min_member;
    s.median_duration_ns = MedianInPlace(*scratch);
    s.spread_ns = static_cast<int64_t>(
        kMadToSigma * static_cast<double>(MadInPlace(*scratch, s.median_duration_ns)));
    previous_frontier = best;
  }
  out->exposed_ns = previous_frontier;
}

void LeaderSet(const StepMatrix& m, int k, int64_t frontier_ns, int64_t tolerance_ns,
               std::vector<int32_t>* out) {
  out->clear();
  for (int i = 0; i < m.members(); ++i) {
    if (m.present(i) && m.cumulative(i, k) >= frontier_ns - tolerance_ns) out->push_back(i);
  }
}

}  // namespace stagefrontier
