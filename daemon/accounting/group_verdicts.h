// The job's verdict when its sync groups are roles (a declared pipeline x tensor layout: ranks of
// different groups do different work by design): the groups' verdicts decide, never a comparison
// across groups. A step of the verdict pipeline after each group decided its own.
//
//   Verdict job = JobVerdictFromGroups(job_accountant_verdict, group_verdicts, schema);
//   // job.sync_group: the group whose verdict it carries ("" when every group is HEALTHY)
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_VERDICTS_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_VERDICTS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "daemon/accounting/accounting_window.h"
#include "daemon/accounting/verdict.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

// A role group's own work per step over its window: the time in io and compute stages (never
// in waits, p2p transfers or mixed stages, which hold other ranks' time), of its least loaded
// rank (a straggler does not make its group heavier by construction).
struct GroupWork {
  std::string group;
  double work_ns = 0;
};
double OwnWorkNs(const AccountingWindow& window, const StageSchema& schema);

// Structural imbalance: the group whose own work exceeds the other groups' median by 15%
// and 1 ms is slower by construction (the pipeline's last stage with the loss, an uneven
// partition). Returns the sentence that says so, or "" when the groups are balanced. Never a
// rank's fault: the verdict's label does not change.
std::string StructuralImbalance(std::span<const GroupWork> groups);

// `job` is the job-wide accountant's verdict over the same window: its window figures (steps,
// exposed time, partial steps, missing ranks) are kept, its rank comparisons dropped.
// HEALTHY when every group is. Otherwise the verdict of the group that holds the fault: a group
// whose top suspect is a work stage (io, compute, mixed) before one whose excess sits in a wait
// or a p2p transfer (that group waited on another group's slow rank through the pipeline), then
// the larger top suspect's excess.
// The heatmap's cells are every group's. `work` (empty: not judged) sets Verdict::structural.
Verdict JobVerdictFromGroups(const Verdict& job, std::span<const Verdict> groups,
                             const StageSchema& schema, std::span<const GroupWork> work = {});

// A step after JobVerdictFromGroups. A `tensor` stage ends together on the ranks of one tensor
// group (their collectives wait for the slowest), so each tensor position's group sees its
// member of that tensor group slow, and stage marks cannot say which one is. When every group
// that is not HEALTHY has its top suspect in the same `tensor` stage on the same member index
// (the same data-parallel replica: every role's ranks are ordered alike), the job's verdict
// names that replica's tensor group, AMBIGUOUS TIE, never one rank of it: the member at that
// index of every group of the same pipeline stage (`pipeline_stages[g]`, groups[g]'s; empty:
// of the groups that flagged, two or more). `members[g]` are groups[g]'s ranks, sorted.
// Leaves `job` alone otherwise.
void NameTensorGroup(std::span<const std::vector<int32_t>> members,
                     std::span<const int32_t> pipeline_stages, std::span<const Verdict> groups,
                     const StageSchema& schema, Verdict* job);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_VERDICTS_H_
