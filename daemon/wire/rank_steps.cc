#include "daemon/wire/rank_steps.h"

namespace stagefrontier::wire {

void FillRankSteps(const PackedStepsEncoder& encoder, v1::RankSteps* out) {
  out->set_base_step(encoder.base_step());
  out->set_count(encoder.count());
  out->set_packed(encoder.bytes());
}

v1::RankSteps MakeRankSteps(const std::string& job, int32_t rank,
                            const PackedStepsEncoder& encoder) {
  v1::RankSteps rs;
  rs.set_job(job);
  rs.set_rank(rank);
  FillRankSteps(encoder, &rs);
  return rs;
}

}  // namespace stagefrontier::wire
