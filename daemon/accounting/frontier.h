// The exact per-step frontier accounting (docs/accounting.md, "Per step: exact, integer,
// clock-free") over one set of ranks: durations, cumulative times, frontier F[k], leader L[k],
// increments ΔF[k], exposed time E, leader margins, lag behind the frontier, and the
// per-stage mean/max a cheap dashboard would show.
//
//   StepMatrix m(/*members=*/4, /*stages=*/5);
//   m.SetMember(0, boundaries_of_rank0);  // b[0..S] on rank 0's own clock
//   ...
//   StepFrontier f;
//   std::vector<int64_t> scratch;
//   ComputeFrontier(m, &f, &scratch);
//   // f.exposed_ns == sum of f.stages[k].increment_ns, exactly.
// (Compiled and run by tests/docs/header_examples_test.cc.)
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_FRONTIER_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_FRONTIER_H_

#include <cstdint>
#include <span>
#include <vector>

namespace stagefrontier {

// One step of one rank set, dense by member index (the position of a rank in its group).
// Only differences of one member's own timestamps are stored.
class StepMatrix {
 public:
  StepMatrix(int members, int stages);

  // Clears every member to absent.
  void Reset();
  // Records a member's boundaries b[0..S] (S+1 values, non-decreasing: validated upstream).
  void SetMember(int member, std::span<const int64_t> boundaries);
  // Records the local-work part of a mixed stage measured by the probe (collective entry
  // minus stage start) for a member.
  void SetProbeLocal(int member, int stage, int64_t local_ns);

  int members() const { return members_; }
  int stages() const { return stages_; }
  bool present(int m) const { return present_[m] != 0; }
  int present_count() const { return present_count_; }
  // d_m[k] and C_m[k] (k is 0-based: stage k spans b[k]..b[k+1]).
  int64_t duration(int m, int k) const { return d_[m * stages_ + k]; }
  int64_t cumulative(int m, int k) const { return c_[m * stages_ + k]; }
  // Cumulative time before stage k (0 for k == 0).
  int64_t cumulative_before(int m, int k) const { return k == 0 ? 0 : cumulative(m, k - 1); }
  // Probe-measured local work in stage k, or -1 when the probe did not see it.
  int64_t probe_local(int m, int k) const { return probe_local_[m * stages_ + k]; }
  std::span<const int64_t> durations() const { return d_; }

 private:
  int members_;
  int stages_;
  int present_count_ = 0;
  std::vector<uint8_t> present_;
  std::vector<int64_t> d_;
  std::vector<int64_t> c_;
  std::vector<int64_t> probe_local_;
};

struct StageFrontier {
  int64_t frontier_ns = 0;         // F[k] = max_m C_m[k]
  int64_t increment_ns = 0;        // ΔF[k] = F[k] - F[k-1] >= 0
  int32_t leader = -1;             // L[k]: member index, lowest on exact ties
  int64_t margin_ns = 0;           // M[k] = F[k] - second largest C_m[k] (0 with one member)
  int64_t mean_duration_ns = 0;    // the mean dashboard: mean over members of d_m[k]
  int64_t max_duration_ns = 0;     // the max dashboard: max over members of d_m[k]
  int64_t median_duration_ns = 0;  // the peer median of d_m[k]
  int64_t spread_ns = 0;           // 1.4826 * MAD over members of d_m[k]
  int64_t min_duration_ns = 0;     // shortest d_m[k]: in a wait stage, the last arriver's wait
  int32_t min_member = -1;         // who had it (lowest member on exact ties)
};

// What an outlier's peers take in a stage: the median of the `present` members' durations; of
// exactly two, the other one's, the shorter (the median of two is halfway to the outlier, so a
// fault would count half).
inline int64_t PeerDurationNs(int present, int64_t min_ns, int64_t median_ns) {
  return present == 2 ? min_ns : median_ns;
}

struct StepFrontier {
  int64_t exposed_ns = 0;  // E = F[S] = sum of increments, exactly
  std::vector<StageFrontier> stages;
};

// Computes the frontier accounting of the present members of `m` into `out`. `scratch` is
// reused between calls to avoid allocation. With no member present, everything is zero.
void ComputeFrontier(const StepMatrix& m, StepFrontier* out, std::vector<int64_t>* scratch);

// Members whose C_m[k] is within `tolerance_ns` of F[k], in member order.
void LeaderSet(const StepMatrix& m, int k, int64_t frontier_ns, int64_t tolerance_ns,
               std::vector<int32_t>* out);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_FRONTIER_H_
