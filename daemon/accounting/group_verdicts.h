// The job's verdict when its sync groups are roles (a declared pipeline x tensor layout: ranks of
// different groups do different work by design): the groups' verdicts decide, never a comparison
// across groups. A step of the verdict pipeline after each group decided its own.
//
//   Verdict job = JobVerdictFromGroups(job_accountant_verdict, group_verdicts, schema);
//   // job.sync_group: the group whose verdict it carries ("" when every group is HEALTHY)
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_VERDICTS_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_VERDICTS_H_

#include <span>

#include "daemon/accounting/verdict.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

// `job` is the job-wide accountant's verdict over the same window: its window figures (steps,
// exposed time, partial steps, missing ranks) are kept, its rank comparisons dropped.
// HEALTHY when every group is. Otherwise the verdict of the group that holds the fault: a group
// whose top suspect is a work stage before one whose excess sits in a wait stage (that group
// waited on another group's slow rank through send/recv), then the larger top suspect's excess.
// The heatmap's cells are every group's.
Verdict JobVerdictFromGroups(const Verdict& job, std::span<const Verdict> groups,
                             const StageSchema& schema);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_GROUP_VERDICTS_H_
