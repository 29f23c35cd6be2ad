// Journal records for the tests of record blocks and their compaction: one step of a node's
// ranks as the coordinator logs it (one batch record), then the step's close.
//
//   std::mt19937_64 rng(7);
//   std::vector<v1::JournalRecord> r = NodeStepRecords(/*step=*/3, /*stages=*/3, /*ranks=*/4, rng);
//   // r[0]: ranks 0..3's step 3 (stage k lasts ~3 ms x (k + 1)); r[1]: closed step 3
#ifndef STAGEFRONTIER_TESTS_DAEMON_ARCHIVE_STEP_RECORDS_H_
#define STAGEFRONTIER_TESTS_DAEMON_ARCHIVE_STEP_RECORDS_H_

#include <cstdint>
#include <random>
#include <vector>

#include "stagefrontier/v1/journal.pb.h"

namespace stagefrontier {

std::vector<v1::JournalRecord> NodeStepRecords(int64_t step, uint32_t stages, int ranks,
                                               std::mt19937_64& rng);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_TESTS_DAEMON_ARCHIVE_STEP_RECORDS_H_
