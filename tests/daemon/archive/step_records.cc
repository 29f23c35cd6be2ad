#include "tests/daemon/archive/step_records.h"

#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"

namespace stagefrontier {

std::vector<v1::JournalRecord> NodeStepRecords(int64_t step, uint32_t stages, int ranks,
                                               std::mt19937_64& rng) {
  std::vector<v1::JournalRecord> out(2);
  std::normal_distribution<double> jitter(0, 20'000);
  std::vector<int64_t> d(stages);
  for (int rank = 0; rank < ranks; ++rank) {
    wire::PackedStepsEncoder enc(stages);
    for (uint32_t k = 0; k < stages; ++k) {
      d[k] = 3'000'000 * (k + 1) + static_cast<int64_t>(jitter(rng));
    }
    enc.Add(step, d.data(), 0);
    *out[0].mutable_ranks()->add_steps() = wire::MakeRankSteps("job", rank, enc);
  }
  out[1].mutable_closed()->set_step(step);
  return out;
}

}  // namespace stagefrontier
