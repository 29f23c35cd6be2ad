#include "daemon/accounting/next_wait.h"

namespace stagefrontier {

std::optional<size_t> NextWaitThatWaited(const AccountingWindow& window, const StageSchema& schema,
                                         size_t i, int after) {
  std::optional<size_t> k =
      after < 0 ? schema.FirstWaitStage() : schema.NextWaitStage(static_cast<size_t>(after));
  for (; k; k = schema.NextWaitStage(*k)) {
    for (int m = 0; m < window.members(); ++m) {
      if (window.present(i, m) && window.duration(i, m, static_cast<int>(*k)) >= kEmptyWaitNs) {
        return k;
      }
    }
  }
  return std::nullopt;
}

std::optional<WaitAt> WaitAfter(const AccountingWindow& window, const StageSchema& schema, size_t i,
                                int k) {
  if (std::optional<size_t> wait = NextWaitThatWaited(window, schema, i, k)) {
    return WaitAt{i, *wait};
  }
  const size_t next = i + 1;
  if (next >= window.size() ||
      window.at(next).accounting.step != window.at(i).accounting.step + 1) {
    return std::nullopt;
  }
  if (std::optional<size_t> wait = NextWaitThatWaited(window, schema, next, -1)) {
    return WaitAt{next, *wait};
  }
  return std::nullopt;
}

}  // namespace stagefrontier
