// Accounting for one set of ranks that synchronize with each other (a sync group, or the
// whole job): the exact frontier per step, robust baselines, excess attributed to
// (stage, rank), and verdicts over a window of recent steps.
//
//   GroupAccountant g("job", schema, /*ranks=*/{0, 1, 2, 3}, EngineConfig{});
//   std::vector<const RankStep*> by_member = {&r0, &r1, nullptr, &r3};   // rank 2 absent
//   const StepAccounting& acc = g.Account(/*step=*/17, by_member);
//   Verdict v = g.DecideVerdict();
// (Compiled and run by tests/docs/header_examples_test.cc.)
//
// Not thread-safe: one thread feeds and queries an accountant.
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_ACCOUNTANT_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_ACCOUNTANT_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "daemon/accounting/accounting_window.h"
#include "daemon/accounting/engine_config.h"
#include "daemon/accounting/frontier.h"
#include "daemon/accounting/group_members.h"
#include "daemon/accounting/group_report.h"
#include "daemon/accounting/probe_bracketing.h"
#include "daemon/accounting/robust_stats.h"
#include "daemon/accounting/step_accounting.h"
#include "daemon/accounting/step_input.h"
#include "daemon/accounting/top_cell.h"
#include "daemon/accounting/verdict.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

class VerdictDecider;

class GroupAccountant {
 public:
  // `ranks` are the group's ranks; member i of every step is ranks[i]. The config must have
  // passed Validate(). `wait_group[i]` names the sync group member i waits with (empty: one
  // group); waits are only compared inside a sync group.
  GroupAccountant(std::string name, const StageSchema& schema, std::vector<int32_t> ranks,
                  const EngineConfig& config, std::vector<int32_t> wait_group = {});

  // Accounts one step. by_member[i] is ranks()[i]'s validated record, or nullptr when that
  // rank did not report (the step is then partial). Steps must arrive in increasing order
  // (the Engine enforces it). The result stays valid until the next call.
  const StepAccounting& Account(int64_t step, std::span<const RankStep* const> by_member);

  // The verdict over the current window (docs/accounting.md, "Verdicts per window"). Cheap
  // enough to call every window.
  Verdict DecideVerdict() const;

  // Closes a window: its verdict, remembered so that a later window's verdict can carry a
  // CLEAR (stage, rank) on supporting evidence alone (see EngineConfig::carry_clear).
  Verdict CloseWindow();

  // The verdict plus the waterfall, dashboards and corroborating statistics.
  GroupReport Report() const;

  const std::string& name() const { return name_; }
  const std::vector<int32_t>& ranks() const { return members_.ranks; }
  const StageSchema& schema() const { return schema_; }
  const AccountingWindow& window() const { return window_; }
  // Probe spans outside their allowed stage are left out of the mixed split and of the
  // last-arriver evidence. Null: every span is used.
  void set_bracketing(const ProbeBracketing* bracketing) { bracketing_ = bracketing; }

 private:
  // The current window's decider, with what earlier windows named and held.
  VerdictDecider Decider() const;

  // An excess counts when above the step's floor and excess_z noise scales.
  struct StepThresholds {
    int64_t min_excess = 0;
    double max_of_r = 0;  // where the largest of `present` healthy ranks lands, in scales
    double excess_z = 0;
    bool Significant(int64_t x, double sigma) const {
      return x > min_excess && static_cast<double>(x) > excess_z * sigma;
    }
  };
  // Stage k's noise in this step, and its excess over the temporal baseline.
  struct StageNoise {
    double peer_sigma = 0;  // cross-rank noise scale
    int64_t tol = 0;        // tie tolerance
    double noise_t = 0;     // temporal noise scale
    int64_t x_t = 0;        // ΔF[k] minus the baseline (0 while warming up)
    bool temporal = false;  // x_t is significant
  };

  // Account's steps, in order (stage_attribution.cc holds the per-stage ones).
  void LoadStep(std::span<const RankStep* const> by_member);
  void LoadProbe(int m, const RankStep& r);
  void BeginStep(int64_t step);
  void AccountStage(int64_t step, int k, const StepThresholds& t);
  StageNoise MeasureNoise(int k, const StepThresholds& t);
  void AttributeWork(int k, const StepThresholds& t, const StageNoise& noise);
  void AttributeWait(int64_t step, int k, const StepThresholds& t, const StageNoise& noise);
  void AttributeMixedProbe(int k, int64_t tol, Attribution* a);
  void UpdateExposedBaseline();
  void UpdateDashboards();
  void ComputeLag();
  // Charges a late start seen at wait stage k to the member's previous-step tail, if the
  // previous step explains it, else to stage k itself.
  void ChargeLateStart(int64_t step, int k, int member, int64_t charge, int64_t margin);
  std::vector<int32_t> ToRanks(std::span<const int32_t> members) const;
  int MemberOf(int32_t rank) const { return members_.MemberOf(rank); }
  // Stage k's cross-rank noise scale learns only from steps it was not flagged in (two ranks
  // present, stage not p2p: see MeasureNoise). A `tensor` stage does: its gap between two
  // replicas is a slow tensor group, persistent, never the neighbours' noise.
  bool LearnsSpreadUnflagged(int k) const {
    return matrix_.present_count() == 2 && schema_.stage(k).kind != StageKind::kP2p;
  }

  std::string name_;
  StageSchema schema_;
  GroupMembers members_;
  EngineConfig config_;
  int stages_;

  StepMatrix matrix_;
  StepFrontier frontier_;
  StepAccounting current_;
  AccountingWindow window_;

  RollingSamples exposed_history_;
  // E per step, steps above its noise threshold left out: what the group's exposed step
  // normally is, for telling a group-wide shift from noise.
  RollingSamples exposed_baseline_;
  std::vector<RollingSamples> baseline_;        // ΔF[k] over unflagged steps
  std::vector<RollingSamples> peer_spread_;     // cross-rank spread of d[k], every step
  std::vector<RollingSamples> mean_dashboard_;  // mean dashboard over unflagged steps
  std::vector<RollingSamples> max_dashboard_;   // max dashboard over unflagged steps

  // Excess charged to each member's tail stages in the previous step (the window's last
  // entry while a step is being accounted), so a late start it causes is not charged twice.
  std::vector<int64_t> previous_tail_charge_;
  std::vector<int64_t> tail_charge_;

  // The (stage, member) the last two closed windows named CLEAR (-1: none), with the last
  // step of each: a window takes the one that ended before it began.
  PriorClear named_[2];
  // The cells those windows held at support level (EngineConfig::confirm_recurring).
  PriorHeld held_[2];

  const ProbeBracketing* bracketing_ = nullptr;
  // member-major, this step's (see WindowStep::probe_wait); empty while the probe saw nothing
  std::vector<int64_t> probe_wait_;

  std::vector<int64_t> scratch_;
  std::vector<int32_t> leaders_;
  std::vector<int32_t> resp_;
  std::vector<uint8_t> in_resp_;  // by member: in resp_
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_ACCOUNTANT_H_
