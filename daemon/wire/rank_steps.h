// Builds the wire message for one rank's packed steps (proto/stagefrontier/v1/ingest.proto).
//
//   PackedStepsEncoder enc(5); enc.Add(...);
//   *batch.add_steps() = MakeRankSteps("run42", /*rank=*/3, enc);
#ifndef STAGEFRONTIER_DAEMON_WIRE_RANK_STEPS_H_
#define STAGEFRONTIER_DAEMON_WIRE_RANK_STEPS_H_

#include <cstdint>
#include <string>

#include "daemon/wire/packed_steps.h"
#include "stagefrontier/v1/ingest.pb.h"

namespace stagefrontier::wire {

// Returns a RankSteps carrying `encoder`'s steps for (job, rank).
v1::RankSteps MakeRankSteps(const std::string& job, int32_t rank,
                            const PackedStepsEncoder& encoder);

// Copies `encoder`'s steps into `out` (job and rank untouched).
void FillRankSteps(const PackedStepsEncoder& encoder, v1::RankSteps* out);

}  // namespace stagefrontier::wire

#endif  // STAGEFRONTIER_DAEMON_WIRE_RANK_STEPS_H_
