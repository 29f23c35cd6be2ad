// The workload the coordinator benchmarks share: a 6-stage schema (data, forward, backward,
// grad_sync, optimizer, log) and its declaration, so that the in-process benchmark and the
// gRPC load harness measure the same job.
//
//   v1::RankDeclaration d = bench::SixStageDeclaration("bench", /*rank=*/3, /*world=*/1024);
#ifndef STAGEFRONTIER_TESTS_BENCH_BENCH_WORKLOAD_H_
#define STAGEFRONTIER_TESTS_BENCH_BENCH_WORKLOAD_H_

#include <cstdint>
#include <string>

#include "stagefrontier/v1/ingest.pb.h"

namespace stagefrontier::bench {

inline constexpr uint32_t kBenchStages = 6;

// Rank `rank`'s declaration of job `job` with `world` ranks and the 6-stage schema.
v1::RankDeclaration SixStageDeclaration(const std::string& job, int32_t rank, int32_t world,
                                        int32_t local_rank = 0);

}  // namespace stagefrontier::bench

#endif  // STAGEFRONTIER_TESTS_BENCH_BENCH_WORKLOAD_H_
