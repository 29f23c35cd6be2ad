// The wait that tells who arrived last after a stage: the next wait stage of the step that
// someone waited in. A wait stage every present member passed in (almost) no time is one the
// group's role leaves empty (the last pipeline stage sends no activations, the first receives
// none): it says nothing of arrival order, so the next one does.
//
//   std::optional<size_t> w = NextWaitThatWaited(window, schema, i, /*after=*/k);
//   if (!w) w = NextWaitThatWaited(window, schema, i + 1, /*after=*/-1);  // the next step's first
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_NEXT_WAIT_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_NEXT_WAIT_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "daemon/accounting/accounting_window.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

// Under this on every present member, a wait stage waited for nobody: an empty stage scope
// measures a few microseconds in C++ and 10-20 us through Python on a busy host, while a wait
// that decides anything (a collective, a receive) takes longer.
inline constexpr int64_t kEmptyWaitNs = 50'000;

// The first wait stage after stage `after` (-1: from the step's start) that some present
// member of window step i spent kEmptyWaitNs or more in; nullopt if none.
std::optional<size_t> NextWaitThatWaited(const AccountingWindow& window, const StageSchema& schema,
                                         size_t i, int after);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_NEXT_WAIT_H_
