// Test helper: builds an AccountingWindow step by step from durations and attributions, for
// unit tests of the verdict steps (no simulator, no engine).
//
//   WindowBuilder b(/*members=*/4, "data:io,compute:compute,sync:sync");
//   b.Step([](int m, int k) { return k == 0 && m == 2 ? 5'000'000 : 1'000'000; },
//          {Charge(/*stage=*/0, {2}, 4'000'000)});
//   const AccountingWindow& w = b.window();
#ifndef STAGEFRONTIER_TESTS_DAEMON_ACCOUNTING_WINDOW_FIXTURE_H_
#define STAGEFRONTIER_TESTS_DAEMON_ACCOUNTING_WINDOW_FIXTURE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "daemon/accounting/accounting_window.h"
#include "daemon/accounting/frontier.h"
#include "daemon/accounting/step_accounting.h"
#include "shm/stage_schema.h"

namespace stagefrontier::testing {

inline Attribution Charge(int stage, std::vector<int32_t> ranks, int64_t excess_ns,
                          AttributionKind kind = AttributionKind::kFrontierLeader,
                          int64_t margin_ns = 0) {
  Attribution a;
  a.seen_at_stage = stage;
  a.stage = stage;
  a.ranks = std::move(ranks);
  a.excess_ns = excess_ns;
  a.margin_ns = margin_ns;
  a.kind = kind;
  return a;
}

class WindowBuilder {
 public:
  WindowBuilder(int members, const std::string& schema, size_t capacity = 100)
      : members_(members),
        schema_(*StageSchema::Parse(schema)),
        stages_(static_cast<int>(schema_.size())),
        window_(capacity, members, stages_) {}

  // Appends step `next_step()`: member m's duration of stage k is duration(m, k) (negative:
  // absent); the step's median, noise and exposed time are filled in.
  void Step(const std::function<int64_t(int m, int k)>& duration,
            std::vector<Attribution> attributions = {}, int64_t peer_noise_ns = 100'000,
            std::vector<int64_t> probe_wait = {}) {
    StepMatrix matrix(members_, stages_);
    StepAccounting acc;
    acc.step = step_++;
    acc.stages.assign(stages_, StageAccounting{});
    std::vector<std::vector<int64_t>> by_stage(stages_);
    for (int m = 0; m < members_; ++m) {
      if (duration(m, 0) < 0) {
        acc.missing_ranks.push_back(m);
        continue;
      }
      std::vector<int64_t> b = {0};
      for (int k = 0; k < stages_; ++k) {
        by_stage[k].push_back(duration(m, k));
        b.push_back(b.back() + duration(m, k));
      }
      acc.exposed_ns = std::max(acc.exposed_ns, b.back());
      matrix.SetMember(m, b);
    }
    acc.partial = !acc.missing_ranks.empty();
    for (int k = 0; k < stages_; ++k) {
      std::sort(by_stage[k].begin(), by_stage[k].end());
      acc.stages[k].median_duration_ns = by_stage[k][by_stage[k].size() / 2];
      acc.stages[k].peer_noise_ns = peer_noise_ns;
    }
    for (const Attribution& a : attributions) acc.stages[a.seen_at_stage].flagged = true;
    acc.attributions = std::move(attributions);
    if (probe_wait.empty()) probe_wait.assign(static_cast<size_t>(members_) * stages_, -1);
    window_.Push(acc, matrix, probe_wait);
  }

  const AccountingWindow& window() const { return window_; }
  const StageSchema& schema() const { return schema_; }

 private:
  int members_;
  StageSchema schema_;
  int stages_;
  AccountingWindow window_;
  int64_t step_ = 0;
};

}  // namespace stagefrontier::testing

#endif  // STAGEFRONTIER_TESTS_DAEMON_ACCOUNTING_WINDOW_FIXTURE_H_
