#include "daemon/accounting/group_accountant.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "daemon/accounting/verdict_decider.h"

namespace stagefrontier {

GroupAccountant::GroupAccountant(std::string name, const StageSchema& schema,
                                 std::vector<int32_t> ranks, const EngineConfig& config,
                                 std::vector<int32_t> wait_group)
    : name_(std::move(name)),
      schema_(schema),
      members_(std::move(ranks), std::move(wait_group)),
      config_(config),
      stages_(static_cast<int>(schema.size())),
      matrix_(members_.size(), stages_),
      window_(static_cast<size_t>(config.window_steps), members_.size(), stages_),
      exposed_history_(static_cast<size_t>(config.baseline_steps)),
      exposed_baseline_(static_cast<size_t>(config.baseline_steps)),
      baseline_(stages_, RollingSamples(static_cast<size_t>(config.baseline_steps))),
      peer_spread_(stages_, RollingSamples(static_cast<size_t>(config.baseline_steps))),
      mean_dashboard_(stages_, RollingSamples(static_cast<size_t>(config.baseline_steps))),
      max_dashboard_(stages_, RollingSamples(static_cast<size_t>(config.baseline_steps))),
      previous_tail_charge_(members_.ranks.size(), 0),
      tail_charge_(members_.ranks.size(), 0),
      in_resp_(members_.ranks.size(), 0) {}

std::vector<int32_t> GroupAccountant::ToRanks(std::span<const int32_t> members) const {
  std::vector<int32_t> out;
  out.reserve(members.size());
  for (int32_t m : members) out.push_back(members_.ranks[m]);
  return out;
}

const StepAccounting& GroupAccountant::Account(int64_t step,
                                               std::span<const RankStep* const> by_member) {
  LoadStep(by_member);
  ComputeFrontier(matrix_, &frontier_, &scratch_);
  BeginStep(step);
  const int present = matrix_.present_count();
  if (present > 0) {
    exposed_history_.Add(current_.exposed_ns);
    const int64_t median_step = exposed_history_.Median();
    StepThresholds t;
    t.min_excess = std::max<int64_t>(
        config_.noise_floor_ns,
        static_cast<int64_t>(config_.min_excess_fraction * static_cast<double>(median_step)));
    t.max_of_r = std::sqrt(2.0 * std::log(std::max(present, 2)));
    t.excess_z = config_.excess_z;
    for (int k = 0; k < stages_; ++k) AccountStage(step, k, t);
    UpdateExposedBaseline();
    UpdateDashboards();
  }
  ComputeLag();
  // This step becomes the window's last entry: the previous step for the next one.
  previous_tail_charge_.swap(tail_charge_);
  window_.Push(current_, matrix_, probe_wait_);
  return current_;
}

void GroupAccountant::LoadStep(std::span<const RankStep* const> by_member) {
  matrix_.Reset();
  // Filled on the first span the probe saw: a job without the probe (most, and every rank of a
  // 100,000-rank one at each step) neither fills nor copies a matrix of -1.
  probe_wait_.clear();
  for (int m = 0; m < members_.size(); ++m) {
    const RankStep* r = by_member[m];
    if (r == nullptr) continue;
    matrix_.SetMember(m, r->boundaries_ns);
    LoadProbe(m, *r);
  }
}

void GroupAccountant::LoadProbe(int m, const RankStep& r) {
  // The probe's view of a stage: the rank waited at its last collective from entering it to
  // its completion; in a mixed stage, local work lasts until that entry. Spans that the stage
  // marks do not bracket are not evidence.
  for (int k = 0; k < stages_; ++k) {
    int64_t latest_exit = std::numeric_limits<int64_t>::min();
    const ProbeSpan* last = nullptr;
    for (const ProbeSpan& span : r.probe) {
      if (static_cast<int>(span.stage) == k && span.exit_ns > latest_exit &&
          span.enter_ns >= r.boundaries_ns[k] && span.exit_ns <= r.boundaries_ns[k + 1] &&
          (bracketing_ == nullptr || bracketing_->Bracketed(r, span))) {
        latest_exit = span.exit_ns;
        last = &span;
      }
    }
    if (last == nullptr) continue;
    if (probe_wait_.empty()) probe_wait_.assign(static_cast<size_t>(members_.size()) * stages_, -1);
    probe_wait_[static_cast<size_t>(m) * stages_ + k] = last->exit_ns - last->enter_ns;
    if (schema_.stage(k).kind == StageKind::kMixed) {
      matrix_.SetProbeLocal(m, k, last->enter_ns - r.boundaries_ns[k]);
    }
  }
}

void GroupAccountant::BeginStep(int64_t step) {
  StepAccounting& acc = current_;
  acc.step = step;
  acc.exposed_ns = frontier_.exposed_ns;
  acc.missing_ranks.clear();
  for (int m = 0; m < members_.size(); ++m) {
    if (!matrix_.present(m)) acc.missing_ranks.push_back(members_.ranks[m]);
  }
  acc.partial = !acc.missing_ranks.empty();
  acc.first_excess_stage = -1;
  acc.stages.assign(stages_, StageAccounting{});
  acc.attributions.clear();
  std::fill(tail_charge_.begin(), tail_charge_.end(), 0);
}

void GroupAccountant::UpdateExposedBaseline() {
  StepAccounting& acc = current_;
  if (exposed_baseline_.size() < static_cast<size_t>(config_.warmup_steps)) {
    acc.exposed_baseline_ns = -1;
    exposed_baseline_.Add(acc.exposed_ns);
    return;
  }
  const int64_t median = exposed_baseline_.Median();
  acc.exposed_baseline_ns = median;
  const double noise =
      std::max(static_cast<double>(config_.noise_floor_ns), exposed_baseline_.NoiseScale());
  // Unlike the stage baselines, a step above the threshold is left out: a group-wide
  // slowdown must stay visible against the level the group had before it.
  if (static_cast<double>(acc.exposed_ns) <=
      static_cast<double>(median) + config_.excess_z * noise) {
    exposed_baseline_.Add(acc.exposed_ns);
  }
}

void GroupAccountant::UpdateDashboards() {
  // The dashboards' own baselines learn only from steps with no excess anywhere: a stall
  // in one stage shows up in another stage's mean (the waits), which must not be learnt.
  if (!current_.attributions.empty()) return;
  for (int k = 0; k < stages_; ++k) {
    mean_dashboard_[k].Add(frontier_.stages[k].mean_duration_ns);
    max_dashboard_[k].Add(frontier_.stages[k].max_duration_ns);
  }
}

void GroupAccountant::ComputeLag() {
  // Lag behind the frontier, for every rank of the group.
  const int n = members_.size();
  current_.lag_ns.assign(static_cast<size_t>(n) * stages_, -1);
  for (int m = 0; m < n; ++m) {
    if (!matrix_.present(m)) continue;
    for (int k = 0; k < stages_; ++k) {
      current_.lag_ns[static_cast<size_t>(m) * stages_ + k] =
          frontier_.stages[k].frontier_ns - matrix_.cumulative(m, k);
    }
  }
}

VerdictDecider GroupAccountant::Decider() const {
  return VerdictDecider({name_, window_, schema_, config_, members_, named_, held_});
}

Verdict GroupAccountant::DecideVerdict() const { return Decider().Decide(); }

Verdict GroupAccountant::CloseWindow() {
  VerdictDecision d;
  Verdict v = Decider().Decide(&d);
  held_[0] = std::move(held_[1]);
  held_[1] = PriorHeld{v.last_step, std::move(d.held), std::move(d.leaning)};
  named_[0] = named_[1];
  named_[1] = PriorClear{v.last_step, -1, -1};
  if (v.label == VerdictLabel::kClear && !v.suspects.empty()) {
    named_[1].stage = v.suspects[0].stage;
    named_[1].member = MemberOf(v.suspects[0].rank);
  }
  return v;
}

}  // namespace stagefrontier
