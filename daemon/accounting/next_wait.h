// The wait that tells who arrived last after a stage: the next wait stage of the step that
// someone waited in. A wait stage every present member passed in (almost) no time is one the
// group's role leaves empty (the last pipeline stage sends no activations, the first receives
// none): it says nothing of arrival order, so the next one does.
//
//   std::optional<WaitAt> w = WaitAfter(window, schema, i, /*k=*/top_stage);
//   if (w) arrivers.LateSet(w->index, w->stage, member, &late);
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

// Where the wait after stage k of window step i is: that step's next wait that waited, else
// (a tail stage, or later waits nobody waited in) the first such wait of window step i + 1
// when it is the next step; nullopt otherwise.
struct WaitAt {
  size_t index;  // window step
  size_t stage;
};
std::optional<WaitAt> WaitAfter(const AccountingWindow& window, const StageSchema& schema, size_t i,
                                int k);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_NEXT_WAIT_H_
