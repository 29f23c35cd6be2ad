#include "daemon/archive/record_block_builder.h"

#include <catch2/catch.hpp>
#include <random>

#include "tests/daemon/archive/step_records.h"

namespace stagefrontier {
namespace {

constexpr uint32_t kStages = 3;

// Steps [0, steps) of 4 ranks, one batch record and one closed record per step.
std::vector<v1::JournalRecord> Journal(int64_t steps) {
  std::mt19937_64 rng(11);
  std::vector<v1::JournalRecord> out;
  for (int64_t s = 0; s < steps; ++s) {
    for (v1::JournalRecord& r : NodeStepRecords(s, kStages, 4, rng)) out.push_back(std::move(r));
  }
  return out;
}

struct Built {
  std::vector<std::string> blocks;
  uint64_t verified = 0;
};

Built Build(const std::vector<v1::JournalRecord>& records, uint32_t block_steps,
            uint32_t verify_every) {
  RecordBlockBuilder builder({.stage_count = kStages, .zstd_level = 3}, block_steps, verify_every);
  Built out;
  auto emit = [&](v1::JournalRecord block) { out.blocks.push_back(block.block()); };
  for (const v1::JournalRecord& r : records) REQUIRE(builder.Add(r, emit).ok());
  REQUIRE(builder.Finish(emit).ok());
  CHECK(builder.blocks() == out.blocks.size());
  out.verified = builder.verified_blocks();
  return out;
}

TEST_CASE("a block ends after block_steps closed steps; the rest goes out at Finish") {
  const auto records = Journal(25);
  const Built built = Build(records, 10, 0);
  REQUIRE(built.blocks.size() == 3);  // 10, 10, then 5 steps at Finish
  std::vector<v1::JournalRecord> decoded;
  for (const std::string& b : built.blocks) {
    REQUIRE(DecodeRecordBlock(b, [&](const v1::JournalRecord& r) {
              decoded.push_back(r);
              return absl::OkStatus();
            }).ok());
  }
  REQUIRE(decoded.size() == records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    CHECK(decoded[i].SerializeAsString() == records[i].SerializeAsString());
  }
}

TEST_CASE("verification checks the first block and every Nth after it, and none at 0") {
  const auto records = Journal(100);  // 10 blocks of 10 steps
  CHECK(Build(records, 10, 0).verified == 0);
  CHECK(Build(records, 10, 1).verified == 10);
  CHECK(Build(records, 10, 4).verified == 3);  // blocks 0, 4, 8
  CHECK(Build(records, 10, 8).verified == 2);  // blocks 0, 8
  CHECK(Build(records, 10, 64).verified == 1);
  // Checking changes nothing in what is written.
  CHECK(Build(records, 10, 1).blocks == Build(records, 10, 0).blocks);
}

TEST_CASE("rounded blocks are never checked (they do not give back the same bytes)") {
  RecordBlockBuilder builder({.stage_count = kStages, .zstd_level = 3, .duration_unit_ns = 1000},
                             10, 1);
  int emitted = 0;
  for (const v1::JournalRecord& r : Journal(20)) {
    REQUIRE(builder.Add(r, [&](v1::JournalRecord) { ++emitted; }).ok());
  }
  CHECK(emitted == 2);
  CHECK(builder.verified_blocks() == 0);
}

}  // namespace
}  // namespace stagefrontier
