// Verdict evidence: a rank that leaves a collective late. Within a step a sync stage is taken
// to end together for its group, so a rank that *leaves* it late (the stage lasts longer on
// its own clock after the collective ended) looks exactly like a late start of the peer that
// waited least there, and the frontier charges that peer (docs/accounting.md, "Known
// limits"). A later wait k of the same step tells them apart: with o_m(j) the member's
// cumulative time at the end of stage j minus its peers' (the other member's in a pair, the
// median member's otherwise), o_m(j) - o_m(k) is how much later than its peers the member
// left j, when k's exits are even; a late start of the peer leaves it at zero.
//
//   const ExitLag lag = LargestExitLag(window, schema, /*j=*/7);
//   if (lag.member >= 0 && lag.z >= 5) { /* lag.member left stage 7 late by lag.mean_ns */ }
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_EXIT_LAG_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_EXIT_LAG_H_

#include <cstdint>

#include "daemon/accounting/accounting_window.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

struct ExitLag {
  int member = -1;     // -1: stage j is no wait, has no later wait, or too few steps
  int next_wait = -1;  // the wait k it was measured against
  double mean_ns = 0;  // over the steps the member was present with a peer
  double z = 0;        // mean over its standard error
  int32_t steps = 0;
};

// Fewer steps than this give no ExitLag.
inline constexpr int32_t kMinExitLagSteps = 10;

// The member that left wait stage j latest on average over the window. Never fails.
ExitLag LargestExitLag(const AccountingWindow& window, const StageSchema& schema, int j);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_EXIT_LAG_H_
