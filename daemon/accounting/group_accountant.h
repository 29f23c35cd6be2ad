// Accounting for one set of ranks that synchronize with each other (a sync group, or the
// whole job): the exact frontier per step, robust baselines, excess attributed to
// (stage, rank), and verdicts over a window of recent steps.
//
//   GroupAccountant g("job", schema, /*ranks=*/{0, 1, 2, 3}, EngineConfig{});
//   std::vector<const RankStep*> by_member = {&r0, &r1, nullptr, &r3};   // rank 2 absent
//   const StepAccounting& acc = g.Account(/*step=*/17, by_member);
//   Verdict v = g.DecideVerdict();
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
#include "daemon/accounting/group_report.h"
#include "daemon/accounting/probe_bracketing.h"
#include "daemon/accounting/robust_stats.h"
#include "daemon/accounting/step_accounting.h"
#include "daemon/accounting/step_input.h"
#include "daemon/accounting/verdict.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

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

  // The verdict over the current window (SPEC §3). Cheap enough to call every window.
  Verdict DecideVerdict() const;

  // Closes a window: its verdict, remembered so that a later window's verdict can carry a
  // CLEAR (stage, rank) on supporting evidence alone (see EngineConfig::carry_clear).
  Verdict CloseWindow();

  // The verdict plus the waterfall, dashboards and corroborating statistics.
  GroupReport Report() const;

  const std::string& name() const { return name_; }
  const std::vector<int32_t>& ranks() const { return ranks_; }
  const StageSchema& schema() const { return schema_; }
  const AccountingWindow& window() const { return window_; }
  // Probe spans outside their allowed stage are left out of the mixed split and of the
  // last-arriver evidence. Null: every span is used.
  void set_bracketing(const ProbeBracketing* bracketing) { bracketing_ = bracketing; }

 private:
  // Charges a late start seen at wait stage k to the member's previous-step tail, if the
  // previous step explains it, else to stage k itself.
  void ChargeLateStart(int64_t step, int k, int member, int64_t charge, int64_t margin);
  // Exposed time saved per window step if (stage k, member) behaved like its peers.
  int64_t WhatIfSaving(int k, int member) const;
  // Members of `member`'s sync group in the late set of wait stage k of window step i: the
  // shortest waits, within noise.
  void LateSet(size_t i, int k, int member, std::vector<int32_t>* out) const;
  // The probe's last arriver among `candidates` (members) at stage k's collectives, or at the
  // next wait stage's when k has none: the member that had the single shortest wait in at
  // least two thirds of the window steps with probe evidence (at least min_flagged_steps of
  // them). Returns -1 when the probe does not single one out; *steps and *evidence say how
  // often it did, out of how many steps.
  int ProbeLastArriver(int k, const std::vector<int>& candidates, int* steps, int* evidence,
                       int* at_stage) const;
  std::vector<int32_t> ToRanks(std::span<const int32_t> members) const;
  int MemberOf(int32_t rank) const;

  std::string name_;
  StageSchema schema_;
  std::vector<int32_t> ranks_;
  EngineConfig config_;
  std::vector<int32_t> wait_group_;
  std::vector<int32_t> member_of_rank_;  // indexed by rank; -1 outside the group
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
  struct NamedCell {
    int64_t last_step = -1;
    int stage = -1;
    int member = -1;
  };
  NamedCell named_[2];

  const ProbeBracketing* bracketing_ = nullptr;
  std::vector<int64_t> probe_wait_;  // member-major, this step's (see WindowStep::probe_wait)

  std::vector<int64_t> scratch_;
  std::vector<int32_t> members_;
  std::vector<int32_t> resp_;
  std::vector<uint8_t> in_resp_;  // by member: in resp_
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_ACCOUNTANT_H_
