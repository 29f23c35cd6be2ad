#include "daemon/accounting/accounting_window.h"

namespace stagefrontier {

AccountingWindow::AccountingWindow(size_t capacity, int members, int stages)
    : ring_(capacity == 0 ? 1 : capacity), members_(members), stages_(stages) {}

void AccountingWindow::Push(const StepAccounting& accounting, const StepMatrix& matrix,
                            const std::vector<int64_t>& probe_wait) {
  size_t slot;
  if (count_ < ring_.size()) {
    slot = (start_ + count_) % ring_.size();
    ++count_;
  } else {
    slot = start_;
    start_ = (start_ + 1) % ring_.size();
  }
  WindowStep& w = ring_[slot];
  w.accounting.step = accounting.step;
  w.accounting.exposed_ns = accounting.exposed_ns;
  w.accounting.exposed_baseline_ns = accounting.exposed_baseline_ns;
  w.accounting.partial = accounting.partial;
  w.accounting.missing_ranks = accounting.missing_ranks;
  w.accounting.first_excess_stage = accounting.first_excess_stage;
  w.accounting.stages = accounting.stages;
  w.accounting.attributions = accounting.attributions;
  w.present.resize(members_);
  for (int m = 0; m < members_; ++m) w.present[m] = matrix.present(m) ? 1 : 0;
  w.durations.assign(matrix.durations().begin(), matrix.durations().end());
  w.probe_wait.assign(probe_wait.begin(), probe_wait.end());
}

int64_t AccountingWindow::cumulative(size_t i, int member, int k) const {
  const int64_t* d = &at(i).durations[static_cast<size_t>(member) * stages_];
  int64_t c = 0;
  for (int j = 0; j <= k; ++j) c += d[j];
  return c;
}

}  // namespace stagefrontier
