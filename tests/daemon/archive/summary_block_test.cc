#include "daemon/archive/summary_block.h"

#include <catch2/catch.hpp>
#include <random>

namespace stagefrontier {
namespace {

constexpr uint32_t kStages = 5;

// Summaries shaped like the engine's: increments around per-stage means, one leader mostly,
// baselines moving slowly, excess = increment - baseline, a partial step with missing ranks.
std::vector<v1::StepSummary> Make(int n, int64_t first_step, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> jitter(0, 30'000);
  std::uniform_int_distribution<int> rank(0, 127);
  std::vector<v1::StepSummary> out;
  int64_t step = first_step;
  for (int i = 0; i < n; ++i) {
    v1::StepSummary s;
    step += (i % 50 == 49) ? 3 : 1;  // a few gaps
    s.set_step(step);
    int64_t exposed = 0;
    for (uint32_t k = 0; k < kStages; ++k) {
      v1::StageStep* st = s.add_stages();
      const int64_t inc = std::max<int64_t>(0, 2'000'000 * (k + 1) + int64_t(jitter(rng)));
      st->set_increment_ns(inc);
      st->set_leader(i % 10 == 0 ? rank(rng) : 17);
      st->set_margin_ns(std::max<int64_t>(0, 40'000 + int64_t(jitter(rng))));
      st->set_baseline_ns(2'000'000 * (k + 1) + (i / 100) * 1'000);
      st->set_excess_ns(inc - st->baseline_ns());
      st->set_mean_ns(inc - 50'000 + int64_t(jitter(rng)));
      st->set_max_ns(inc + 5'000);
      exposed += inc;
    }
    s.set_exposed_ns(exposed);
    if (i % 37 == 5) {
      s.set_partial(true);
      s.add_missing_ranks(3);
      s.add_missing_ranks(90);
    }
    if (i % 3 == 0) s.set_first_excess_stage(i % 2 == 0 ? "data" : "backward");
    out.push_back(std::move(s));
  }
  return out;
}

void RequireSame(const std::vector<v1::StepSummary>& a, const std::vector<v1::StepSummary>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("summary " << i);
    REQUIRE(a[i].SerializeAsString() == b[i].SerializeAsString());
  }
}

TEST_CASE("summary blocks give back the same summaries, byte for byte") {
  const std::vector<v1::StepSummary> in = Make(256, 1000, 1);
  SummaryBlockStats stats;
  auto block = EncodeSummaryBlock(in, {.stage_count = kStages}, &stats);
  REQUIRE(block.ok());
  CHECK(stats.steps == 256);
  CHECK(stats.whole_steps == 0);
  CHECK(stats.block_bytes == block->size());
  CHECK(stats.frontier_bytes + stats.detail_bytes == stats.block_bytes);
  CHECK(stats.block_bytes * 3 < stats.input_bytes);  // much smaller than the protobufs
  std::vector<v1::StepSummary> out;
  REQUIRE(DecodeSummaryBlock(*block, &out).ok());
  RequireSame(in, out);
}

TEST_CASE("summaries the columns cannot rebuild travel whole, in their place") {
  std::vector<v1::StepSummary> in = Make(40, 0, 2);
  in[3].mutable_stages()->RemoveLast();  // another stage count
  {  // an unknown field (99, varint 1) after the known ones
    std::string bytes = in[7].SerializeAsString() + std::string("\x98\x06\x01", 3);
    REQUIRE(in[7].ParseFromString(bytes));
  }
  in[9].set_exposed_ns(-5);                                    // not the sum: still columns
  in[11].set_step(in[10].step());                              // a repeated step number
  in[12].set_step(-7);                                         // and one going back
  in[13].mutable_stages(2)->set_leader(-1);
  in[14].mutable_stages(1)->set_excess_ns(INT64_MIN);
  in[15].mutable_stages(0)->set_max_ns(INT64_MAX);
  SummaryBlockStats stats;
  auto block = EncodeSummaryBlock(in, {.stage_count = kStages}, &stats);
  REQUIRE(block.ok());
  CHECK(stats.whole_steps == 2);
  std::vector<v1::StepSummary> out;
  REQUIRE(DecodeSummaryBlock(*block, &out).ok());
  RequireSame(in, out);
}

TEST_CASE("summary block bad arguments are refused") {
  const std::vector<v1::StepSummary> in = Make(3, 0, 3);
  CHECK(absl::IsInvalidArgument(EncodeSummaryBlock(in, {.stage_count = 0}).status()));
  CHECK(absl::IsInvalidArgument(EncodeSummaryBlock(in, {.stage_count = 999}).status()));
  CHECK(absl::IsInvalidArgument(EncodeSummaryBlock({}, {.stage_count = kStages}).status()));
}

TEST_CASE("a damaged summary block is an error, never other numbers") {
  const std::vector<v1::StepSummary> in = Make(64, 0, 4);
  auto block = EncodeSummaryBlock(in, {.stage_count = kStages});
  REQUIRE(block.ok());
  std::vector<v1::StepSummary> out;
  SECTION("every cut") {
    for (size_t n = 0; n < block->size(); ++n) {
      INFO("cut at " << n);
      CHECK(absl::IsInvalidArgument(DecodeSummaryBlock(block->substr(0, n), &out)));
      CHECK(out.empty());
    }
  }
  SECTION("bytes after the block") {
    CHECK(absl::IsInvalidArgument(DecodeSummaryBlock(*block + "x", &out)));
  }
  SECTION("every bit flip") {
    for (size_t i = 1; i < block->size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        std::string bad = *block;
        bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
        out.clear();
        const absl::Status s = DecodeSummaryBlock(bad, &out);
        // zstd ignores a few bits of its frame header; decoded, they must change nothing.
        if (s.ok()) {
          RequireSame(in, out);
        } else {
          CHECK(out.empty());
          CHECK(absl::IsInvalidArgument(s));
        }
      }
    }
  }
  SECTION("version 0 and a newer version") {
    std::string bad = *block;
    bad[0] = 0;
    CHECK(absl::IsInvalidArgument(DecodeSummaryBlock(bad, &out)));
    bad[0] = 2;
    const absl::Status s = DecodeSummaryBlock(bad, &out);
    CHECK(absl::IsFailedPrecondition(s));
    CHECK_THAT(std::string(s.message()), Catch::Contains("summary block version 2 is newer"));
  }
}

}  // namespace
}  // namespace stagefrontier
