// Who arrived last at a wait, over the window: from the stage marks (the shortest waits,
// within noise) and from the collective probe (the single shortest probed wait).
//
//   LastArrivers last(window, schema, members, config);
//   std::vector<int32_t> late;
//   last.LateSet(/*i=*/3, /*wait stage=*/2, /*member=*/5, &late);
//   ProbeArrival p = last.ProbeLastArriver(/*stage=*/1, {4, 13});
//   if (p.member >= 0) { /* the probe singles p.member out at p.at_stage */ }
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_LAST_ARRIVERS_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_LAST_ARRIVERS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/accounting/accounting_window.h"
#include "daemon/accounting/engine_config.h"
#include "daemon/accounting/group_members.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

struct ProbeArrival {
  int member = -1;    // -1: the probe does not single one out
  int steps = 0;      // steps it had the single shortest wait
  int evidence = 0;   // steps with probe evidence for every candidate
  int at_stage = -1;  // the stage whose collectives were compared
};

class LastArrivers {
 public:
  LastArrivers(const AccountingWindow& window, const StageSchema& schema,
               const GroupMembers& members, const EngineConfig& config)
      : window_(window), schema_(schema), members_(members), config_(config) {}

  // Members of `member`'s sync group in the late set of wait stage k of window step i: the
  // shortest waits, within noise.
  void LateSet(size_t i, int k, int member, std::vector<int32_t>* out) const;

  // The probe's last arriver among `candidates` (members) at stage k's collectives, or at the
  // next wait stage's when k has none: the member that had the single shortest wait in at
  // least two thirds of the window steps with probe evidence (at least min_flagged_steps).
  ProbeArrival ProbeLastArriver(int k, const std::vector<int>& candidates) const;

 private:
  bool HasProbe(int stage) const;

  const AccountingWindow& window_;
  const StageSchema& schema_;
  const GroupMembers& members_;
  const EngineConfig& config_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_LAST_ARRIVERS_H_
