#include "daemon/archive/record_block.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <random>

#include "daemon/wire/rank_steps.h"

namespace stagefrontier {
namespace {

constexpr uint32_t kStages = 4;

// One node's batch as the coordinator logs it: `ranks` ranks, steps [first, first + n).
v1::JournalRecord Logged(const std::string& job, int first_rank, int ranks, int64_t first, int n,
                         std::mt19937_64& rng) {
  v1::JournalRecord r;
  std::normal_distribution<double> jitter(0, 20'000);
  for (int k = first_rank; k < first_rank + ranks; ++k) {
    wire::PackedStepsEncoder enc(kStages);
    for (int64_t s = first; s < first + n; ++s) {
      int64_t d[kStages];
      for (uint32_t j = 0; j < kStages; ++j) {
        d[j] = std::max<int64_t>(0, 5'000'000 * (j + 1) + static_cast<int64_t>(jitter(rng)));
      }
      enc.Add(s, d, s % 7 == 0 ? 1u : 0u);
    }
    *r.mutable_ranks()->add_steps() = wire::MakeRankSteps(job, k, enc);
  }
  return r;
}

v1::JournalRecord Closed(int64_t step) {
  v1::JournalRecord r;
  r.mutable_closed()->set_step(step);
  return r;
}

std::vector<v1::JournalRecord> Decode(const std::string& block) {
  std::vector<v1::JournalRecord> out;
  const absl::Status s = DecodeRecordBlock(block, [&](const v1::JournalRecord& r) {
    out.push_back(r);
    return absl::OkStatus();
  });
  INFO(s.message());
  REQUIRE(s.ok());
  return out;
}

bool HasUnknownFields(const google::protobuf::Message& m) {
  return !m.GetReflection()->GetUnknownFields(m).empty();
}

// A journal's records after its declaration: every kind, two jobs' ranks interleaved, late and
// re-sent steps, gaps in the step numbers.
std::vector<v1::JournalRecord> MixedRecords() {
  std::mt19937_64 rng(7);
  std::vector<v1::JournalRecord> records;
  for (int64_t step = 0; step < 40; step += 4) {
    records.push_back(Logged("job-a", 0, 8, step, 4, rng));
    records.push_back(Logged("job-a", 8, 8, step, 4, rng));
    records.push_back(Logged("other", 3, 2, step * 2, 4, rng));  // another job's ranks
    for (int64_t s = step; s < step + 4; ++s) records.push_back(Closed(s));
  }
  records.push_back(Logged("job-a", 0, 8, 12, 3, rng));   // re-sent: steps back in time
  records.push_back(Logged("job-a", 5, 1, 100, 1, rng));  // a gap
  v1::JournalRecord config;
  config.mutable_config()->set_window_steps(50);
  config.mutable_config()->set_excess_z(3.5);
  records.push_back(config);
  v1::JournalRecord pause;
  pause.mutable_pause()->set_paused(true);
  records.push_back(pause);
  v1::JournalRecord dropped;
  dropped.mutable_dropped()->set_step(int64_t{1} << 39);
  records.push_back(dropped);
  records.push_back(Closed(-5));  // nonsense a journal may still hold: kept exactly
  // A RankSteps with probe intervals travels whole.
  v1::JournalRecord probed = Logged("job-a", 2, 1, 41, 2, rng);
  probed.mutable_ranks()->mutable_steps(0)->add_collectives()->set_step(41);
  records.push_back(probed);
  // Non-canonical packed bytes (a padded varint) that still decode: travels whole.
  v1::JournalRecord padded = Logged("job-a", 1, 1, 42, 1, rng);
  std::string p = padded.ranks().steps(0).packed();
  p.replace(0, 1, std::string("\x80\x00", 2));
  padded.mutable_ranks()->mutable_steps(0)->set_packed(p);
  records.push_back(padded);
  // Fields the columns do not know (a newer writer's, field 101 here) travel whole: in a
  // RankSteps, beside RanksLogged, in a closed step.
  const std::string unknown("\xa8\x06\x07", 3);
  v1::JournalRecord newer_rank = Logged("job-a", 3, 1, 43, 1, rng);
  v1::RankSteps rs;
  REQUIRE(rs.ParseFromString(newer_rank.ranks().steps(0).SerializeAsString() + unknown));
  *newer_rank.mutable_ranks()->mutable_steps(0) = rs;
  records.push_back(newer_rank);
  v1::JournalRecord newer_record;
  REQUIRE(newer_record.ParseFromString(Logged("job-a", 4, 1, 43, 1, rng).SerializeAsString() +
                                       unknown));
  records.push_back(newer_record);
  v1::JournalRecord newer_closed;
  REQUIRE(newer_closed.ParseFromString(Closed(43).SerializeAsString() + unknown));
  records.push_back(newer_closed);
  // An empty RankSteps (count 0) and a negative rank are canonical: columns.
  v1::JournalRecord empty;
  v1::RankSteps* e = empty.mutable_ranks()->add_steps();
  e->set_job("job-a");
  e->set_rank(-3);
  e->set_base_step(9);
  records.push_back(empty);
  return records;
}

TEST_CASE("a block gives back every record byte for byte") {
  const auto records = MixedRecords();
  RecordBlockStats stats;
  auto block = EncodeRecordBlock(records, {.stage_count = kStages}, &stats);
  REQUIRE(block.ok());
  const auto decoded = Decode(*block);
  REQUIRE(decoded.size() == records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    INFO("record " << i);
    CHECK(decoded[i].SerializeAsString() == records[i].SerializeAsString());
  }
  CHECK(stats.records == records.size());
  // config, pause, dropped, probed, padded, and the three with a newer field
  CHECK(stats.whole_records == 8);
  CHECK(stats.rank_steps == 10 * (8 + 8 + 2) * 4 + 8 * 3 + 1);
  CHECK(stats.rank_stage_steps == stats.rank_steps * kStages);
  CHECK(stats.block_bytes == block->size());
  CHECK(stats.block_bytes < stats.input_bytes / 2);
}

TEST_CASE("rounded to microseconds: durations within 500 ns, everything else exact") {
  const auto records = MixedRecords();
  RecordBlockStats exact_stats, rounded_stats;
  auto exact = EncodeRecordBlock(records, {.stage_count = kStages}, &exact_stats);
  auto rounded = EncodeRecordBlock(records, {.stage_count = kStages, .duration_unit_ns = 1000},
                                   &rounded_stats);
  REQUIRE(exact.ok());
  REQUIRE(rounded.ok());
  // The padded packed vector is re-encoded once rounded: lossy already, it goes into columns.
  CHECK(rounded_stats.whole_records == exact_stats.whole_records - 1);
  CHECK(rounded->size() < exact->size() * 3 / 4);
  RecordBlockInfo info;
  std::vector<v1::JournalRecord> got;
  REQUIRE(DecodeRecordBlock(
              *rounded,
              [&](const v1::JournalRecord& r) {
                got.push_back(r);
                return absl::OkStatus();
              },
              &info)
              .ok());
  CHECK(info.stage_count == kStages);
  CHECK(info.duration_unit_ns == 1000);
  CHECK(info.records == records.size());
  REQUIRE(got.size() == records.size());
  int64_t rounded_values = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    INFO("record " << i);
    // Whole: not steps, or steps with more than the columns keep (probe intervals, a newer field).
    if (!records[i].has_ranks() || records[i].ranks().steps(0).collectives_size() > 0 ||
        HasUnknownFields(records[i]) || HasUnknownFields(records[i].ranks().steps(0))) {
      CHECK(got[i].SerializeAsString() == records[i].SerializeAsString());
      continue;
    }
    REQUIRE(got[i].ranks().steps_size() == records[i].ranks().steps_size());
    for (int k = 0; k < records[i].ranks().steps_size(); ++k) {
      const v1::RankSteps& a = records[i].ranks().steps(k);
      const v1::RankSteps& b = got[i].ranks().steps(k);
      CHECK(a.job() == b.job());
      CHECK(a.rank() == b.rank());
      CHECK(a.count() == b.count());
      std::vector<int64_t> x, y;
      auto collect = [&](std::vector<int64_t>* out) {
        return [out](int64_t step, const int64_t* d, uint32_t flags) {
          out->push_back(step);
          out->push_back(flags);
          out->insert(out->end(), d, d + kStages);
        };
      };
      REQUIRE(
          wire::DecodePackedSteps(a.packed(), a.count(), a.base_step(), kStages, collect(&x)).ok());
      REQUIRE(
          wire::DecodePackedSteps(b.packed(), b.count(), b.base_step(), kStages, collect(&y)).ok());
      REQUIRE(x.size() == y.size());
      for (size_t j = 0; j < x.size(); ++j) {
        if (j % (kStages + 2) < 2) {
          CHECK(x[j] == y[j]);  // step numbers and flags exact
        } else {
          CHECK(std::abs(x[j] - y[j]) <= 500);
          CHECK(y[j] % 1000 == 0);
          ++rounded_values;
        }
      }
    }
  }
  CHECK(rounded_values > 1000);
  CHECK(
      EncodeRecordBlock(records, {.stage_count = kStages, .duration_unit_ns = 0}).status().code() ==
      absl::StatusCode::kInvalidArgument);
}

TEST_CASE("steady durations cost a fraction of a byte each") {
  // The columns' point: a rank's stage that lasts the same every step costs almost nothing.
  std::vector<v1::JournalRecord> records;
  for (int64_t step = 0; step < 100; ++step) {
    v1::JournalRecord r;
    for (int k = 0; k < 64; ++k) {
      wire::PackedStepsEncoder enc(kStages);
      const int64_t d[kStages] = {1'000'000 + k, 20'000'000, 3'000'000, 400'000};
      enc.Add(step, d, 0);
      *r.mutable_ranks()->add_steps() = wire::MakeRankSteps("steady", k, enc);
    }
    records.push_back(r);
    records.push_back(Closed(step));
  }
  RecordBlockStats stats;
  auto block = EncodeRecordBlock(records, {.stage_count = kStages}, &stats);
  REQUIRE(block.ok());
  CHECK(stats.whole_records == 0);
  CHECK(static_cast<double>(stats.block_bytes) / stats.rank_stage_steps < 0.1);
  CHECK(Decode(*block).size() == records.size());
}

TEST_CASE("a newer version is refused with a message saying so") {
  auto block = EncodeRecordBlock(MixedRecords(), {.stage_count = kStages});
  REQUIRE(block.ok());
  std::string newer = *block;
  newer[0] = 2;
  int calls = 0;
  absl::Status s = DecodeRecordBlock(newer, [&](const v1::JournalRecord&) {
    ++calls;
    return absl::OkStatus();
  });
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message() ==
        "record block version 2 is newer than the versions this build reads (1..1): upgrade");
  newer[0] = 0;
  CHECK(DecodeRecordBlock(newer, [&](const v1::JournalRecord&) {
          ++calls;
          return absl::OkStatus();
        }).code() == absl::StatusCode::kInvalidArgument);
  CHECK(calls == 0);
}

TEST_CASE("every cut is an error; a flipped bit is an error or changes nothing") {
  std::mt19937_64 rng(3);
  std::vector<v1::JournalRecord> records = {Logged("j", 0, 4, 0, 3, rng), Closed(0), Closed(1)};
  auto block = EncodeRecordBlock(records, {.stage_count = kStages});
  REQUIRE(block.ok());
  int calls = 0;
  auto sink = [&](const v1::JournalRecord&) {
    ++calls;
    return absl::OkStatus();
  };
  for (size_t n = 0; n < block->size(); ++n) {
    INFO("cut at " << n);
    CHECK_FALSE(DecodeRecordBlock(block->substr(0, n), sink).ok());
  }
  CHECK_FALSE(DecodeRecordBlock(*block + "x", sink).ok());
  CHECK(calls == 0);
  // zstd ignores a few bits (an unused frame-header bit, padding in its entropy tables); the
  // frame's content checksum makes every other flip an error. Never other records.
  int harmless = 0;
  for (size_t i = 0; i < block->size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = *block;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      INFO("byte " << i << " bit " << bit);
      std::vector<v1::JournalRecord> got;
      const absl::Status s = DecodeRecordBlock(bad, [&](const v1::JournalRecord& r) {
        got.push_back(r);
        return absl::OkStatus();
      });
      if (!s.ok()) {
        CHECK(got.empty());
        continue;
      }
      ++harmless;
      REQUIRE(got.size() == records.size());
      for (size_t r = 0; r < got.size(); ++r) {
        CHECK(got[r].SerializeAsString() == records[r].SerializeAsString());
      }
    }
  }
  CHECK(harmless < 8);
}

TEST_CASE("the sink's error stops the decode and comes back") {
  auto block = EncodeRecordBlock(MixedRecords(), {.stage_count = kStages});
  REQUIRE(block.ok());
  int calls = 0;
  absl::Status s = DecodeRecordBlock(*block, [&](const v1::JournalRecord&) {
    return ++calls == 3 ? absl::DataLossError("stop") : absl::OkStatus();
  });
  CHECK(s.code() == absl::StatusCode::kDataLoss);
  CHECK(calls == 3);
}

TEST_CASE("what cannot be encoded is refused with the reason") {
  std::vector<v1::JournalRecord> records = {Closed(1)};
  CHECK(EncodeRecordBlock(records, {.stage_count = 0}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(EncodeRecordBlock({}, {.stage_count = kStages}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  v1::JournalRecord nested;
  nested.set_block("x");
  records.push_back(nested);
  auto s = EncodeRecordBlock(records, {.stage_count = kStages}).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(s.message() == "record block: a block cannot hold another block");
}

}  // namespace
}  // namespace stagefrontier
