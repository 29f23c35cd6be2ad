#include "daemon/coordinator/detector_health.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/accounting/robust_stats.h"
#include "daemon/common/duration_format.h"

namespace stagefrontier {

DetectorHealth::DetectorHealth(StageSchema schema, DetectorHealthOptions options)
    : schema_(std::move(schema)), options_(options) {
  stage_lasted_steps_.assign(schema_.size(), 0);
  for (size_t k = 0; k < schema_.size(); ++k) {
    if (schema_.stage(k).kind == StageKind::kSync) sync_stages_.push_back(k);
  }
  arrival_skew_ns_.resize(sync_stages_.size());
  sync_spread_ns_.resize(sync_stages_.size());
}

void DetectorHealth::set_groups(std::vector<int32_t> group_of_rank) {
  group_of_rank_ = std::move(group_of_rank);
  group_count_ =
      group_of_rank_.empty()
          ? 1
          : static_cast<size_t>(*std::max_element(group_of_rank_.begin(), group_of_rank_.end())) +
                1;
}

void DetectorHealth::AddStep(const StepInput& input, bool partial) {
  ++steps_;
  if (!partial) ++complete_steps_;
  std::vector<int64_t> totals;
  totals.reserve(input.ranks.size());
  for (const RankStep& r : input.ranks) {
    const std::vector<int64_t>& b = r.boundaries_ns;
    if (b.size() != schema_.size() + 1) continue;
    totals.push_back(b.back() - b.front());
  }
  for (size_t k = 0; k < schema_.size(); ++k) {
    const bool lasted = std::any_of(input.ranks.begin(), input.ranks.end(), [&](const RankStep& r) {
      return r.boundaries_ns.size() == schema_.size() + 1 &&
             r.boundaries_ns[k + 1] - r.boundaries_ns[k] >= options_.zero_stage_ns;
    });
    if (lasted) ++stage_lasted_steps_[k];
  }
  step_ns_.push_back(MedianInPlace(totals));
  if (input.ranks.size() < 2) return;
  // Per group: the extremes of arrival and duration; the step's figure is the group with the
  // largest arrival skew (where a wait outside the stage would show).
  const size_t group_count = group_count_;
  for (size_t i = 0; i < sync_stages_.size(); ++i) {
    const size_t k = sync_stages_[i];
    arrive_min_.assign(group_count, INT64_MAX);
    arrive_max_.assign(group_count, INT64_MIN);
    dur_min_.assign(group_count, INT64_MAX);
    dur_max_.assign(group_count, INT64_MIN);
    for (const RankStep& r : input.ranks) {
      const std::vector<int64_t>& b = r.boundaries_ns;
      if (b.size() != schema_.size() + 1) continue;
      size_t g = 0;
      if (!group_of_rank_.empty()) {
        if (r.rank < 0 || static_cast<size_t>(r.rank) >= group_of_rank_.size()) continue;
        g = static_cast<size_t>(group_of_rank_[r.rank]);
      }
      const int64_t arrive = b[k] - b[0];  // when this rank reached the sync stage
      const int64_t dur = b[k + 1] - b[k];
      arrive_min_[g] = std::min(arrive_min_[g], arrive);
      arrive_max_[g] = std::max(arrive_max_[g], arrive);
      dur_min_[g] = std::min(dur_min_[g], dur);
      dur_max_[g] = std::max(dur_max_[g], dur);
    }
    int64_t skew = -1, spread = 0;
    for (size_t g = 0; g < group_count; ++g) {
      if (arrive_min_[g] > arrive_max_[g]) continue;  // no rank of this group
      // A stage a group's role leaves empty (the last pipeline stage sends no activations):
      // nothing there to wait, by design.
      if (!group_of_rank_.empty() && dur_max_[g] < options_.role_empty_ns) continue;
      if (arrive_max_[g] - arrive_min_[g] > skew) {
        skew = arrive_max_[g] - arrive_min_[g];
        spread = dur_max_[g] - dur_min_[g];
      }
    }
    if (skew < 0) continue;
    arrival_skew_ns_[i].push_back(skew);
    sync_spread_ns_[i].push_back(spread);
  }
}

DetectorHealth::CounterGrowth DetectorHealth::CheckCounters(
    const std::vector<RankRecordCounters>& ranks) {
  at_window_start_.resize(ranks.size());
  CounterGrowth out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankRecordCounters& now = ranks[r];
    const RankRecordCounters& then = at_window_start_[r];
    // Counters restart with a new stub owner: growth is measured from the lower value.
    const auto grew = [](uint64_t a, uint64_t b) { return b > a ? b - a : 0; };
    if (const uint64_t n = grew(then.clock_backwards, now.clock_backwards); n > 0) {
      out.backwards.push_back(absl::StrCat("rank ", r, " (", n, ")"));
    }
    if (const uint64_t n = grew(then.clock_ahead, now.clock_ahead); n > 0) {
      out.ahead.push_back(absl::StrCat("rank ", r, " (", n, ")"));
    }
    const uint64_t lost = grew(then.dropped, now.dropped);
    const uint64_t kept = grew(then.accepted, now.accepted);
    if (lost > 0 && static_cast<double>(lost) >
                        options_.max_dropped_fraction * static_cast<double>(lost + kept)) {
      out.dropped.push_back(absl::StrFormat("rank %d (%d of %d)", r, lost, lost + kept));
    }
  }
  at_window_start_ = ranks;
  return out;
}

void DetectorHealth::AddClockConditions(const CounterGrowth& growth) {
  if (!growth.backwards.empty()) {
    current_.push_back({"clock_backwards",
                        absl::StrCat("records whose time went backwards from ",
                                     absl::StrJoin(growth.backwards, ", "),
                                     ": stage marks must come from CLOCK_MONOTONIC in order "
                                     "(MarkAt with another clock?); their durations are wrong")});
  }
  if (!growth.ahead.empty()) {
    current_.push_back({"clock_jump", absl::StrCat("records ending in the future of the node's "
                                                   "monotonic clock from ",
                                                   absl::StrJoin(growth.ahead, ", "),
                                                   ": the stub's clock is not the node's "
                                                   "CLOCK_MONOTONIC, or it jumped")});
  }
}

void DetectorHealth::AddZeroStageCondition() {
  std::vector<std::string> zero;
  for (size_t k = 0; k < schema_.size(); ++k) {
    if (steps_ > 0 && static_cast<double>(stage_lasted_steps_[k]) <=
                          options_.zero_stage_max_fraction * static_cast<double>(steps_)) {
      zero.push_back(schema_.stage(k).name);
    }
  }
  if (zero.empty()) return;
  current_.push_back(
      {"stage_always_zero",
       absl::StrCat("stage(s) ", absl::StrJoin(zero, ", "), " lasted under ",
                    options_.zero_stage_ns / 1000, " us on every rank in (nearly) all ", steps_,
                    " steps of the window: declared but never marked (or marked empty), so "
                    "time that belongs to them is charged to their neighbours")});
}

void DetectorHealth::AddSyncNeverWaitsConditions() {
  const int64_t step = MedianInPlace(step_ns_);
  for (size_t i = 0; i < sync_stages_.size(); ++i) {
    if (static_cast<int64_t>(arrival_skew_ns_[i].size()) < options_.min_complete_steps) continue;
    const int64_t skew = MedianInPlace(arrival_skew_ns_[i]);
    const int64_t spread = MedianInPlace(sync_spread_ns_[i]);
    const bool judged = skew >= options_.min_arrival_skew_ns &&
                        static_cast<double>(skew) >= options_.min_arrival_skew_fraction * step;
    if (judged && static_cast<double>(spread) < options_.sync_absorbed_fraction * skew) {
      current_.push_back(
          {"sync_never_waits",
           absl::StrCat("ranks reach sync stage ", schema_.stage(sync_stages_[i]).name, " up to ",
                        FormatMs(skew),
                        " apart (median) yet it lasts the same on all of them (spread ",
                        FormatMs(spread),
                        "): the wait is not inside it (an asynchronous collective? "
                        "mark the stage where the wait happens)")});
    }
  }
}

void DetectorHealth::AddWindowConditions(int64_t steps_accounted, const CounterGrowth& growth) {
  if (steps_accounted < options_.warmup_steps || complete_steps_ < options_.min_complete_steps) {
    current_.push_back(
        {"too_few_steps",
         absl::StrCat(steps_accounted, " steps accounted (the baselines need ",
                      options_.warmup_steps, "), ", complete_steps_,
                      " complete in this window (at least ", options_.min_complete_steps,
                      " needed): the verdict has too little to compare")});
  }
  if (!growth.dropped.empty()) {
    current_.push_back(
        {"records_dropped",
         absl::StrCat("ranks that lost more than ",
                      static_cast<int>(options_.max_dropped_fraction * 100),
                      "% of their records in the window: ", absl::StrJoin(growth.dropped, ", "),
                      " (ring full: the sidecar fell behind or is not running; "
                      "sfctl health shows the counters)")});
  }
  if (!layout_problem_.empty()) {
    current_.push_back({"layout_rejected",
                        absl::StrCat(layout_problem_,
                                     ": the job is accounted as one group, so ranks that may do "
                                     "different work (pipeline stages) are compared with each "
                                     "other; fix the layout each rank declares "
                                     "(docs/user-guide.md \"3D-parallel jobs\")")});
  }
}

void DetectorHealth::StartWindow() {
  steps_ = 0;
  complete_steps_ = 0;
  std::fill(stage_lasted_steps_.begin(), stage_lasted_steps_.end(), 0);
  step_ns_.clear();
  for (auto& v : arrival_skew_ns_) v.clear();
  for (auto& v : sync_spread_ns_) v.clear();
}

const std::vector<DetectorCondition>& DetectorHealth::CloseWindow(
    const std::vector<RankRecordCounters>& ranks, int64_t steps_accounted) {
  current_.clear();
  // Clocks and lost records: the growth of each rank's counters during the window.
  const CounterGrowth growth = CheckCounters(ranks);
  AddClockConditions(growth);
  AddZeroStageCondition();
  AddSyncNeverWaitsConditions();
  AddWindowConditions(steps_accounted, growth);
  StartWindow();
  return current_;
}

}  // namespace stagefrontier
