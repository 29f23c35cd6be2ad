// The last W accounted steps of one rank set: each step's accounting and its duration
// matrix. Verdicts, corroborating statistics and what-if figures are computed over it.
//
//   AccountingWindow window(/*capacity=*/100, /*members=*/16, /*stages=*/5);
//   window.Push(accounting, matrix);
//   for (size_t i = 0; i < window.size(); ++i) use(window.at(i).accounting);  // oldest first
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_ACCOUNTING_WINDOW_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_ACCOUNTING_WINDOW_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/accounting/frontier.h"
#include "daemon/accounting/step_accounting.h"

namespace stagefrontier {

struct WindowStep {
  StepAccounting accounting;       // lag_ns is not kept here
  std::vector<uint8_t> present;    // by member
  std::vector<int64_t> durations;  // member-major d_m[k]
  // member-major: the member's wait at the last collective the probe saw in stage k
  // (exit - enter), -1 where the probe saw none. The shortest wait is the last arriver. Empty
  // where the probe saw nothing in the step (every entry -1).
  std::vector<int64_t> probe_wait;
};

class AccountingWindow {
 public:
  AccountingWindow(size_t capacity, int members, int stages);

  // Appends a step, evicting the oldest when full. Copies what it keeps. `probe_wait` empty: the
  // probe saw nothing in the step.
  void Push(const StepAccounting& accounting, const StepMatrix& matrix,
            const std::vector<int64_t>& probe_wait);

  size_t size() const { return count_; }
  size_t capacity() const { return ring_.size(); }
  int members() const { return members_; }
  int stages() const { return stages_; }
  // i = 0 is the oldest retained step.
  const WindowStep& at(size_t i) const { return ring_[(start_ + i) % ring_.size()]; }
  int64_t duration(size_t i, int member, int k) const {
    return at(i).durations[static_cast<size_t>(member) * stages_ + k];
  }
  bool present(size_t i, int member) const { return at(i).present[member] != 0; }
  int64_t probe_wait(size_t i, int member, int k) const {
    const std::vector<int64_t>& w = at(i).probe_wait;
    return w.empty() ? -1 : w[static_cast<size_t>(member) * stages_ + k];
  }
  // Cumulative time of `member` at the end of stage k in step i.
  int64_t cumulative(size_t i, int member, int k) const;

 private:
  std::vector<WindowStep> ring_;
  size_t start_ = 0;
  size_t count_ = 0;
  int members_;
  int stages_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_ACCOUNTING_WINDOW_H_
