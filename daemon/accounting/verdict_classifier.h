// Verdict step 6: classification. Given the top cell and its evidence, an ordered list of
// rules; the first that claims the window sets the Verdict's label, reason and candidates and
// the VerdictDecision the renderer words. Rules never write prose.
//
//   ClassifyContext ctx{schema, config, members, table, support, arrivers, evidence, rivals, top,
//                       &window};
//   ClassifyChargedCell(ctx, &verdict, &decision);   // CLEAR, or AMBIGUOUS with a reason
//
// Adding a verdict kind (a hang, a pipeline's structural imbalance): add a VerdictKind, write
// `bool MyRule(const ClassifyContext&, Verdict*, VerdictDecision*)` that returns false unless
// it applies, insert it in kChargedCellRules (verdict_classifier.cc) where it takes precedence,
// add its words to verdict_text.cc, and test the rule alone (verdict_classifier_test.cc).
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_CLASSIFIER_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_CLASSIFIER_H_

#include <cstdint>
#include <vector>

#include "daemon/accounting/accounting_window.h"
#include "daemon/accounting/engine_config.h"
#include "daemon/accounting/excess_table.h"
#include "daemon/accounting/exit_lag.h"
#include "daemon/accounting/group_members.h"
#include "daemon/accounting/last_arrivers.h"
#include "daemon/accounting/rank_evidence.h"
#include "daemon/accounting/top_cell.h"
#include "daemon/accounting/top_cell_evidence.h"
#include "daemon/accounting/verdict.h"
#include "daemon/accounting/verdict_decision.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

struct ClassifyContext {
  const StageSchema& schema;
  const EngineConfig& config;
  const GroupMembers& members;
  const ExcessTable& table;
  const RankSupport& support;
  const LastArrivers& arrivers;
  const TopCellEvidence& evidence;
  const Rivals& rivals;
  CellRef top;
  const AccountingWindow* window = nullptr;  // LateExitRule's evidence; null: no such rule
};

// A rule claims the window (returns true) after setting the verdict's label, reason,
// candidates and the decision; it leaves both alone otherwise. `v` arrives AMBIGUOUS with the
// evidence fields and suspects set, the top cell first.
using VerdictRule = bool (*)(const ClassifyContext&, Verdict*, VerdictDecision*);

bool MixedSyncRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d);
// A pipeline transfer (kind p2p) takes its neighbour's time as much as its own: charged, yet
// the last to arrive at the next wait in under half of those steps, it held nobody in its
// group back (HEALTHY; a neighbour's noise is not a rank's fault).
bool P2pNeighbourRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d);
// A pipeline rank's arrival at a sync stage follows its neighbours' transfers: a top cell at a
// sync stage (no work stage of its own rank explains it, or the top cell would have moved
// there) that leads by less than the tie tolerance, in a schema with p2p or tensor stages
// (StageSchema::WaitsOutsideGroup), is HEALTHY:
// the neighbours' time, not a straggler (a healthy 4x2 pipeline's last stage read CLEAR on
// its dp_sync by 0.63 ms, noise 7.16 ms).
bool PipelineWaitRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d);
// A rank late at a sync stage that is not the step's first wait, with only its own io and
// compute stages since the wait before and none of them slower, left that earlier collective
// late: a collective does not end at one instant for every rank (Gloo on busy cores hands one
// rank its result a few hundred microseconds to a few ms after the others, often the same
// rank). The step's first wait is left alone (there a late start is time lost between
// steps). HEALTHY when the rank was the last to arrive in at least half the charged steps
// and the lateness charged to it costs under kExitSpreadMaterial of the window's exposed
// time; a costlier late exit is still named. (Healthy pipelines ending each step with a
// job-wide all-reduce read CLEAR on a rank's loss_sync, leading by 1.1-3.0 noise
// tolerances, costing 1.1-4.1% of the step: docs/results.md, session 30.)
bool CollectiveExitRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d);
// A top cell at a sync stage j charged as some rank's late start may be another rank's late
// *exit* from j (exit_lag.h): when another member left j later than its peers against the
// next wait, strongly (z >= rank_z_strong) and by at least half the top cell's charge per
// step, the window is about that member: HEALTHY (kExitSpread) when its lateness costs under
// kExitSpreadMaterial of the exposed time, else CLEAR on (j, that member) (kLateExit). Checked
// before the tie rules: the charged peer is not the one at fault.
bool LateExitRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d);
bool CoLeaderTieRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d);
bool SplitRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d);
bool MarginTieRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d);
bool ConcurrentRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d);
bool ClearRule(const ClassifyContext& c, Verdict* v, VerdictDecision* d);  // always claims

// The rules in order; ClearRule last.
const std::vector<VerdictRule>& ChargedCellRules();

// Runs ChargedCellRules until one claims the window.
void ClassifyChargedCell(const ClassifyContext& c, Verdict* v, VerdictDecision* d);

// The probe's last arriver among `ranks` settles a tie or concurrent lead: CLEAR on it, the
// suspects led by it. False (nothing changed) when the probe does not single one out.
bool SettleByProbe(const ClassifyContext& c, const std::vector<int32_t>& ranks, Verdict* v,
                   VerdictDecision* d);

// No rank stands out (TopCellBasis::kGroup): AMBIGUOUS TIE group-wide when the window's
// median exposed step is materially and clearly above the group's baseline as the window
// began, else HEALTHY. `exposed` holds the window's exposed steps (reordered).
void ClassifyGroupExcess(const AccountingWindow& window, const EngineConfig& config,
                         const GroupMembers& members, const ExcessTable& table,
                         std::vector<int64_t>* exposed, double step_ns, Verdict* v,
                         VerdictDecision* d);

// The rank evidence names an unsupported cell's real cause (TopCellBasis::kEvidence): CLEAR.
void ClassifyByEvidence(const AccountingWindow& window, const GroupMembers& members,
                        const TopCellChoice& top, Verdict* v, VerdictDecision* d);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_VERDICT_CLASSIFIER_H_
