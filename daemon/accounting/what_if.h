// The what-if of a suspect: the exposed time per window step saved if (stage k, member)
// behaved like its peers: its excess over the peer median, but no more than its lead over
// the next rank to arrive at the following wait (measured by waits: no clock is compared).
//
//   int64_t saved_ns = WhatIfSaving(window, schema, members, /*stage=*/0, /*member=*/5);
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_WHAT_IF_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_WHAT_IF_H_

#include <cstdint>

#include "daemon/accounting/accounting_window.h"
#include "daemon/accounting/group_members.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

int64_t WhatIfSaving(const AccountingWindow& window, const StageSchema& schema,
                     const GroupMembers& members, int k, int member);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_WHAT_IF_H_
