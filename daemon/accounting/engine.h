// The accounting engine of one job: validates each step's per-rank records and accounts
// them job-wide and, when the job declares several sync groups (e.g. data-parallel groups
// inside pipeline stages), per group too. No I/O, no threads.
//
//   JobConfig job{.schema = *StageSchema::Parse("data:io,forward:compute,backward:compute,"
//                                                "grad_sync:sync,optimizer:compute"),
//                 .world_size = 16,
//                 .groups = {},  // one sync group: the whole job
//                 .group_names = {},
//                 .groups_are_roles = false,
//                 .engine = EngineConfig{},
//                 .probe_bracket_rules = "",
//                 .group_pipeline_stages = {}};
//   absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(job);
//   absl::Status s = (*engine)->AddStep(step_input);     // InvalidArgument on bad records
//   JobReport report = (*engine)->Report();
//   for (const Verdict& v : (*engine)->TakeClosedVerdicts()) publish(v);
// (Compiled and run by tests/docs/header_examples_test.cc.)
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_ENGINE_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_ENGINE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/accounting/engine_config.h"
#include "daemon/accounting/group_accountant.h"
#include "daemon/accounting/group_report.h"
#include "daemon/accounting/probe_bracketing.h"
#include "daemon/accounting/step_accounting.h"
#include "daemon/accounting/step_input.h"
#include "daemon/accounting/verdict.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

struct JobConfig {
  StageSchema schema;
  int32_t world_size = 0;
  // Sync groups: each a list of ranks; together they must cover every rank exactly once.
  // Empty means one group, the whole job.
  std::vector<std::vector<int32_t>> groups;
  // One name per group ("pp1", "pp0.tp2"); empty: "group0", "group1", ...
  std::vector<std::string> group_names;
  // The groups do different work by design (pipeline stages, tensor positions: a declared
  // layout): ranks are compared within their group only, and the job's verdict is its groups'
  // (group_verdicts.h). False: groups only scope the waits (data-parallel groups of one role).
  bool groups_are_roles = false;
  EngineConfig engine;
  // Which stages may contain which collectives (probe_bracketing.h); empty: any collective
  // in any sync or mixed stage.
  std::string probe_bracket_rules;
  // With roles: each group's pipeline stage (the groups of one pipeline stage are its tensor
  // positions: a tensor group is one replica's member of each); empty: not known.
  std::vector<int32_t> group_pipeline_stages;
};

struct JobReport {
  GroupReport job;                  // job-wide frontier
  std::vector<GroupReport> groups;  // one per sync group when there are several
};

struct EngineCounters {
  int64_t steps_accounted = 0;
  int64_t partial_steps = 0;
  int64_t rejected_steps = 0;  // invalid records, duplicate ranks, old step numbers
};

class Engine {
 public:
  // Fails with InvalidArgument on a bad world size, group layout, engine config or probe
  // bracketing rules.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Engine>> Create(JobConfig config);

  // Accounts one step. All records are validated first; any invalid record, a rank reported
  // twice, or a step number not above the last accounted one rejects the whole step
  // (InvalidArgument / OutOfRange / FailedPrecondition naming the record) and changes nothing
  // but the rejected counter. Ranks absent from `input` make the step partial.
  [[nodiscard]] absl::Status AddStep(const StepInput& input);

  // The latest step's job-wide accounting (valid until the next AddStep); null before any.
  const StepAccounting* LastStep() const { return last_; }
  // The latest step's accounting in group g (only when the job has several groups).
  const StepAccounting* LastGroupStep(size_t g) const;

  // Verdict and report over the current (sliding) window.
  Verdict CurrentVerdict() const;
  JobReport Report() const;

  // Verdicts of windows that closed since the last call (every window_steps steps, job-wide
  // first, then each group's), oldest first. At most 1024 are kept.
  std::vector<Verdict> TakeClosedVerdicts();

  const JobConfig& config() const { return config_; }
  const EngineCounters& counters() const { return counters_; }
  // Bracketing validation of every probe span accounted so far.
  const ProbeBracketing& bracketing() const { return *bracketing_; }

 private:
  Engine(JobConfig config, ProbeBracketing bracketing);
  // The job-wide accountant's verdict, or its groups' when they are roles.
  Verdict JobVerdict(Verdict job, std::span<const Verdict> groups) const;

  JobConfig config_;
  std::unique_ptr<ProbeBracketing> bracketing_;
  std::unique_ptr<GroupAccountant> job_;
  std::vector<std::unique_ptr<GroupAccountant>> groups_;
  std::vector<const StepAccounting*> last_group_;
  const StepAccounting* last_ = nullptr;
  int64_t last_step_ = INT64_MIN;
  int64_t steps_in_window_ = 0;
  std::deque<Verdict> closed_;
  EngineCounters counters_;
  std::vector<const RankStep*> by_rank_;
  std::vector<const RankStep*> by_member_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_ENGINE_H_
