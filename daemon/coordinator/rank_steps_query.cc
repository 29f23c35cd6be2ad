#include "daemon/coordinator/rank_steps_query.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/coordinator/proto_convert.h"

namespace stagefrontier {

absl::Status CheckRankStepsRequest(const v1::GetRankStepsRequest& request, int32_t world_size) {
  if (request.to_step() < request.from_step() || request.limit() < 0 ||
      request.limit() > kMaxRankStepsLimit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad step range [", request.from_step(), ", ", request.to_step(), "] or limit ",
        request.limit(), " (0..", kMaxRankStepsLimit, " rank-steps, 0: ", kMaxRankStepsLimit, ")"));
  }
  std::vector<bool> named(static_cast<size_t>(std::max(world_size, 0)), false);
  for (int32_t r : request.ranks()) {
    if (r < 0 || r >= world_size) {
      return absl::OutOfRangeError(absl::StrCat("rank ", r, " is outside world size ", world_size));
    }
    if (named[static_cast<size_t>(r)]) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", r, " is named twice"));
    }
    named[static_cast<size_t>(r)] = true;
  }
  const int32_t limit = request.limit() > 0 ? request.limit() : kMaxRankStepsLimit;
  const int32_t per_step = request.ranks().empty() ? world_size : request.ranks_size();
  if (per_step > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("one step of ", per_step, " ranks holds more rank-steps than the limit of ",
                     limit, ": name at most ", limit, " ranks"));
  }
  return absl::OkStatus();
}

absl::Status FillRankSteps(const JobState& job, const v1::GetRankStepsRequest& request,
                           v1::GetRankStepsReply* out) {
  out->Clear();
  if (absl::Status s = CheckRankStepsRequest(request, job.world_size()); !s.ok()) return s;
  const int32_t limit = request.limit() > 0 ? request.limit() : kMaxRankStepsLimit;
  std::vector<bool> wanted;
  if (!request.ranks().empty()) {
    wanted.assign(static_cast<size_t>(job.world_size()), false);
    for (int32_t r : request.ranks()) wanted[static_cast<size_t>(r)] = true;
  }
  SchemaToProto(job.schema(), out->mutable_stages());
  out->set_world_size(job.world_size());
  out->set_next_step(-1);
  int64_t used = 0;
  std::vector<const RankStep*> ranks;
  const int64_t oldest =
      job.VisitHeldInputs(request.from_step(), request.to_step(), [&](const StepInput& in) {
        ranks.clear();
        for (const RankStep& rs : in.ranks) {
          if (wanted.empty() || wanted[static_cast<size_t>(rs.rank)]) ranks.push_back(&rs);
        }
        const int64_t cost = std::max<int64_t>(1, static_cast<int64_t>(ranks.size()));
        if (used + cost > limit) {
          out->set_next_step(in.step);
          return false;
        }
        used += cost;
        std::sort(ranks.begin(), ranks.end(),
                  [](const RankStep* a, const RankStep* b) { return a->rank < b->rank; });
        v1::StepRecords* step = out->add_steps();
        step->set_step(in.step);
        for (const RankStep* rs : ranks) {
          v1::RankRecord* rec = step->add_ranks();
          rec->set_rank(rs->rank);
          for (size_t k = 1; k < rs->boundaries_ns.size(); ++k) {
            rec->add_durations_ns(rs->boundaries_ns[k] - rs->boundaries_ns[k - 1]);
          }
        }
        return true;
      });
  out->set_oldest_held_step(oldest);
  return absl::OkStatus();
}

}  // namespace stagefrontier
