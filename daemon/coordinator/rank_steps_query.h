// Query.GetRankSteps (proto/stagefrontier/v1/query.proto): each rank's recorded stage durations
// for a range of steps, read from the raw inputs a job keeps for re-accounting
// (JobOptions::history_rank_steps), in whole steps up to a bound on the rank-steps returned.
// What sfctl export lays out on per-rank tracks (docs/cli.md).
//
//   v1::GetRankStepsReply reply;
//   absl::Status s = FillRankSteps(*job, request, &reply);  // QueryService::GetRankSteps
//   if (!s.ok()) return ToGrpcStatus(s);
//   // reply.steps(): per step, per rank, durations_ns in reply.stages() order
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_RANK_STEPS_QUERY_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_RANK_STEPS_QUERY_H_

#include <cstdint>

#include "absl/status/status.h"
#include "daemon/coordinator/job_state.h"
#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

// The most rank-steps one reply holds, and the default limit: 10,000 rank-steps of 32 stages
// of a day each stay under gRPC's default 4 MiB message.
inline constexpr int32_t kMaxRankStepsLimit = 10'000;

// Checks a request against a job of `world_size` ranks. Returns OK, or InvalidArgument for
// to_step < from_step, a limit outside [0, kMaxRankStepsLimit], a rank named twice, or more
// ranks asked (every rank when none is named) than the limit lets one step hold; OutOfRange
// for a rank outside [0, world_size).
[[nodiscard]] absl::Status CheckRankStepsRequest(const v1::GetRankStepsRequest& request,
                                                 int32_t world_size);

// Fills `out` (cleared first) with the job's stages and world size, and the held steps of
// [from_step, to_step], oldest first, each with the ranks asked that reported it (by rank) and
// their stage durations; oldest_held_step, and next_step where the limit cut the range.
// Fails as CheckRankStepsRequest, leaving `out` empty.
[[nodiscard]] absl::Status FillRankSteps(const JobState& job,
                                         const v1::GetRankStepsRequest& request,
                                         v1::GetRankStepsReply* out);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_RANK_STEPS_QUERY_H_
