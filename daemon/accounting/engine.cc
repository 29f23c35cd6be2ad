#include "daemon/accounting/engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/accounting/group_members.h"
#include "daemon/accounting/group_verdicts.h"

namespace stagefrontier {

namespace {
constexpr size_t kMaxClosedVerdicts = 1024;
constexpr int32_t kMaxWorldSize = 1 << 20;
}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(JobConfig config) {
  if (config.world_size < 1 || config.world_size > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size ", config.world_size, " is outside [1, ", kMaxWorldSize, "]"));
  }
  if (absl::Status s = config.engine.Validate(); !s.ok()) return s;
  if (!config.groups.empty()) {
    std::vector<int> seen(config.world_size, 0);
    for (size_t g = 0; g < config.groups.size(); ++g) {
      if (config.groups[g].empty()) {
        return absl::InvalidArgumentError(absl::StrCat("sync group ", g, " is empty"));
      }
      for (int32_t r : config.groups[g]) {
        if (r < 0 || r >= config.world_size) {
          return absl::InvalidArgumentError(absl::StrCat("sync group ", g, " names rank ", r,
                                                         ", outside [0, ", config.world_size, ")"));
        }
        if (seen[r]++) {
          return absl::InvalidArgumentError(
              absl::StrCat("rank ", r, " belongs to more than one sync group"));
        }
      }
    }
    if (!config.group_names.empty() && config.group_names.size() != config.groups.size()) {
      return absl::InvalidArgumentError(absl::StrCat(config.group_names.size(), " group names for ",
                                                     config.groups.size(), " sync groups"));
    }
    for (int32_t r = 0; r < config.world_size; ++r) {
      if (!seen[r]) {
        return absl::InvalidArgumentError(absl::StrCat("rank ", r, " is in no sync group"));
      }
    }
  }
  absl::StatusOr<ProbeBracketing> bracketing =
      ProbeBracketing::Create(config.schema, config.world_size, config.probe_bracket_rules);
  if (!bracketing.ok()) return bracketing.status();
  return std::unique_ptr<Engine>(new Engine(std::move(config), std::move(*bracketing)));
}

Engine::Engine(JobConfig config, ProbeBracketing bracketing)
    : config_(std::move(config)),
      bracketing_(std::make_unique<ProbeBracketing>(std::move(bracketing))) {
  std::vector<int32_t> all(config_.world_size);
  for (int32_t r = 0; r < config_.world_size; ++r) all[r] = r;
  if (config_.groups.size() > 1) {
    for (size_t g = 0; g < config_.groups.size(); ++g) {
      std::string name =
          config_.group_names.empty() ? absl::StrCat("group", g) : config_.group_names[g];
      groups_.push_back(std::make_unique<GroupAccountant>(std::move(name), config_.schema,
                                                          config_.groups[g], config_.engine));
      groups_.back()->set_bracketing(bracketing_.get());
    }
  }
  job_ = std::make_unique<GroupAccountant>("job", config_.schema, all, config_.engine,
                                           GroupOfRank(config_.groups, config_.world_size));
  job_->set_bracketing(bracketing_.get());
  last_group_.assign(groups_.size(), nullptr);
  by_rank_.assign(config_.world_size, nullptr);
}

absl::Status Engine::AddStep(const StepInput& input) {
  auto reject = [this](absl::Status s) {
    ++counters_.rejected_steps;
    return s;
  };
  if (last_ != nullptr && input.step <= last_step_) {
    return reject(absl::FailedPreconditionError(
        absl::StrCat("step ", input.step, " is not after the last accounted step ", last_step_,
                     " (duplicate or late)")));
  }
  std::fill(by_rank_.begin(), by_rank_.end(), nullptr);
  for (const RankStep& r : input.ranks) {
    if (absl::Status s = ValidateRankStep(config_.schema, config_.world_size, r); !s.ok()) {
      return reject(absl::Status(s.code(), absl::StrCat("step ", input.step, ": ", s.message())));
    }
    if (by_rank_[r.rank] != nullptr) {
      return reject(absl::InvalidArgumentError(
          absl::StrCat("step ", input.step, ": rank ", r.rank, " reported twice")));
    }
    by_rank_[r.rank] = &r;
  }
  for (const RankStep& r : input.ranks) bracketing_->Check(input.step, r);
  last_ = &job_->Account(input.step, by_rank_);
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::vector<int32_t>& ranks = config_.groups[g];
    by_member_.resize(ranks.size());
    for (size_t i = 0; i < ranks.size(); ++i) by_member_[i] = by_rank_[ranks[i]];
    last_group_[g] = &groups_[g]->Account(input.step, by_member_);
  }
  last_step_ = input.step;
  ++counters_.steps_accounted;
  if (last_->partial) ++counters_.partial_steps;
  if (++steps_in_window_ == config_.engine.window_steps) {
    steps_in_window_ = 0;
    Verdict job = job_->CloseWindow();
    std::vector<Verdict> groups;
    for (const auto& g : groups_) groups.push_back(g->CloseWindow());
    closed_.push_back(JobVerdict(std::move(job), groups));
    for (Verdict& g : groups) closed_.push_back(std::move(g));
    while (closed_.size() > kMaxClosedVerdicts) closed_.pop_front();
  }
  return absl::OkStatus();
}

const StepAccounting* Engine::LastGroupStep(size_t g) const {
  return g < last_group_.size() ? last_group_[g] : nullptr;
}

Verdict Engine::JobVerdict(Verdict job, std::span<const Verdict> groups) const {
  if (!config_.groups_are_roles || groups.empty()) return job;
  std::vector<GroupWork> work;
  work.reserve(groups_.size());
  for (const auto& g : groups_) work.push_back({g->name(), OwnWorkNs(g->window(), config_.schema)});
  Verdict out = JobVerdictFromGroups(job, groups, config_.schema, work);
  NameTensorGroup(config_.groups, config_.group_pipeline_stages, groups, config_.schema, &out);
  return out;
}

Verdict Engine::CurrentVerdict() const {
  std::vector<Verdict> groups;
  if (config_.groups_are_roles) {
    for (const auto& g : groups_) groups.push_back(g->DecideVerdict());
  }
  return JobVerdict(job_->DecideVerdict(), groups);
}

JobReport Engine::Report() const {
  JobReport r;
  r.job = job_->Report();
  for (const auto& g : groups_) r.groups.push_back(g->Report());
  if (config_.groups_are_roles && !r.groups.empty()) {
    std::vector<Verdict> groups;
    for (const GroupReport& g : r.groups) groups.push_back(g.verdict);
    r.job.verdict = JobVerdict(std::move(r.job.verdict), groups);
  }
  return r;
}

std::vector<Verdict> Engine::TakeClosedVerdicts() {
  std::vector<Verdict> out(closed_.begin(), closed_.end());
  closed_.clear();
  return out;
}

}  // namespace stagefrontier
