// Which operator inside a stage makes the suspect rank slow: the suspect's captured steps
// against reference ranks' captures of the same steps (KAIR's operator stage, online).
//
//   OperatorProfile suspect = ...;                    // ProfileOperators on rank 11's trace
//   std::vector<OperatorProfile> references = {...};  // the same stage on ranks 2 and 5
//   absl::StatusOr<OperatorReport> r = CompareOperators(suspect, references);
//   for (const OperatorFinding& f : r->findings) { ... f.path, RoleName(f.role), f.excess_ns }
//
// Per call path, the suspect's mean time per step is compared with the references' per-step
// times (median and MAD, pooled over ranks and steps): beyond `outlier_scales` robust scales
// and material, it is a duration outlier. A waiting operator (a collective, a wait, a
// synchronize) that is an outlier waited for someone else: a victim. An operator that starts
// late (whether or not it also took longer: its duration does not explain the time before it)
// passes the blame to the operator that ran before it under the same parent; when that one ended on
// time, the gap between them (time in no profiled operator: Python code, a sleep, a lock) is the
// finding, a dependency edge. Late starts whose blame ends at a culprit are folded into it.
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_OPERATOR_COMPARE_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_OPERATOR_COMPARE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/captures/operator_profile.h"

namespace stagefrontier {

enum class OperatorRole : uint8_t {
  kCulprit = 0,     // takes longer on the suspect
  kVictim = 1,      // a waiting operator that waited longer: someone else was late
  kDependency = 2,  // a late start after a predecessor that ended on time: the gap
};

// "culprit", "victim", "dependency".
const char* OperatorRoleName(OperatorRole role);

struct CompareOptions {
  double outlier_scales = 3.0;        // KAIR's 3-sigma rule, on median and MAD
  int64_t noise_floor_ns = 20'000;    // robust scales never go below this...
  double relative_floor = 0.05;       // ...nor this fraction of the reference median
  int64_t min_excess_ns = 50'000;     // an excess per step below this is not material...
  double min_excess_fraction = 0.02;  // ...nor below this fraction of the reference stage
  size_t top = 5;
};

struct OperatorFinding {
  std::string path;  // call path; for a dependency "gap: PREDECESSOR -> OPERATOR"
  OperatorRole role = OperatorRole::kCulprit;
  double suspect_ns = 0;       // per step, mean over the suspect's steps
  double reference_ns = 0;     // per step, median over the references' steps
  double excess_ns = 0;        // what it adds per step on the suspect
  double z = 0;                // excess in robust scales of the references
  double start_delay_ns = 0;   // how much later it starts than on the references
  int32_t late_followers = 0;  // operators that started late only because of this one
  // A culprit that is no operator: the time between two operators of one traced function
  // (its own code: Python, a sleep, a lock), named "<function> (own time between A and B)".
  bool own_time = false;
  // The call path whose time holds it: its own path; for a gap or own time, the path it lies
  // under ("" for none). Findings nested this way overlap.
  std::string within;
};

struct OperatorReport {
  std::string stage;
  int32_t suspect_rank = -1;
  std::vector<int32_t> reference_ranks;
  int32_t suspect_steps = 0;
  int32_t reference_steps = 0;            // rank-steps pooled
  double stage_suspect_ns = 0;            // the stage per step on the suspect (mean)
  double stage_reference_ns = 0;          // and on the references (median)
  std::vector<OperatorFinding> findings;  // by excess, largest first; at most options.top
  // The findings' excess per step, summed, each span of time once: a finding within another
  // finding's call path (a child of a slower parent) is in the parent's excess already.
  double explained_ns = 0;
  int32_t nested_findings = 0;  // findings left out of explained_ns for that
  std::vector<std::string> notes;
};

// Compares `suspect` with `references` (the same stage). Fails with InvalidArgument when
// there is no reference, the stages differ, or a profile has no step.
[[nodiscard]] absl::StatusOr<OperatorReport> CompareOperators(
    const OperatorProfile& suspect, const std::vector<OperatorProfile>& references,
    const CompareOptions& options = CompareOptions{});

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_OPERATOR_COMPARE_H_
