#include "tests/bench/bench_workload.h"

namespace stagefrontier::bench {

v1::RankDeclaration SixStageDeclaration(const std::string& job, int32_t rank, int32_t world,
                                        int32_t local_rank) {
  v1::RankDeclaration d;
  d.set_job(job);
  d.set_rank(rank);
  d.set_world_size(world);
  d.set_local_rank(local_rank);
  const char* names[] = {"data", "forward", "backward", "grad_sync", "optimizer", "log"};
  const v1::StageKind kinds[] = {v1::STAGE_KIND_IO,      v1::STAGE_KIND_COMPUTE,
                                 v1::STAGE_KIND_COMPUTE, v1::STAGE_KIND_SYNC,
                                 v1::STAGE_KIND_COMPUTE, v1::STAGE_KIND_IO};
  for (uint32_t k = 0; k < kBenchStages; ++k) {
    v1::Stage* s = d.add_stages();
    s->set_name(names[k]);
    s->set_kind(kinds[k]);
  }
  return d;
}

}  // namespace stagefrontier::bench
