// The compact step vector: round trips exactly and refuses every malformed input by name.
#include "daemon/wire/packed_steps.h"

#include <catch2/catch.hpp>
#include <vector>

namespace stagefrontier::wire {
namespace {

struct Got {
  int64_t step;
  std::vector<int64_t> d;
  uint32_t flags;
};

absl::Status Decode(const PackedStepsEncoder& e, std::vector<Got>* out) {
  return DecodePackedSteps(
      e.bytes(), e.count(), e.base_step(), e.stage_count(),
      [&](int64_t step, const int64_t* d, uint32_t flags) {
        out->push_back({step, std::vector<int64_t>(d, d + e.stage_count()), flags});
      });
}

TEST_CASE("packed steps round trip, with gaps, big and zero durations") {
  PackedStepsEncoder e(3);
  const int64_t d0[] = {0, 1, 86'400'000'000'000};
  const int64_t d1[] = {4'000'000, 12'345'678, 7};
  e.Add(100, d0, 0);
  e.Add(101, d1, 5);
  e.Add(250, d1, 0xffffffffU);
  std::vector<Got> got;
  REQUIRE(Decode(e, &got).ok());
  REQUIRE(got.size() == 3);
  CHECK(got[0].step == 100);
  CHECK(got[0].d == std::vector<int64_t>(d0, d0 + 3));
  CHECK(got[1].step == 101);
  CHECK(got[1].flags == 5);
  CHECK(got[2].step == 250);
  CHECK(got[2].d == std::vector<int64_t>(d1, d1 + 3));
  CHECK(got[2].flags == 0xffffffffU);
  // Compact: a 5-stage step of ~30 ms stages costs about 4 bytes per stage.
  PackedStepsEncoder f(5);
  const int64_t d5[] = {4'000'000, 8'000'000, 12'000'000, 300'000, 3'000'000};
  for (int s = 0; s < 100; ++s) f.Add(s, d5, 0);
  CHECK(f.bytes().size() <= 100 * (1 + 5 * 4 + 1));
}

TEST_CASE("packed steps: malformed input gets a specific error") {
  PackedStepsEncoder e(2);
  const int64_t d[] = {10, 20};
  e.Add(7, d, 0);
  e.Add(8, d, 0);
  const auto err = [&](const std::string& bytes, uint32_t count, int64_t base, uint32_t stages) {
    absl::Status s =
        DecodePackedSteps(bytes, count, base, stages, [](int64_t, const int64_t*, uint32_t) {});
    REQUIRE(!s.ok());
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  CHECK_THAT(err(e.bytes(), 3, 7, 2), Catch::Contains("truncated step number"));
  CHECK_THAT(err(e.bytes().substr(0, 3), 2, 7, 2), Catch::Contains("truncated"));
  CHECK_THAT(err(e.bytes() + "x", 2, 7, 2), Catch::Contains("bytes after the last"));
  CHECK_THAT(err(e.bytes(), 2, 7, 0), Catch::Contains("0 stages"));
  CHECK_THAT(err(e.bytes(), 2, 7, 40), Catch::Contains("40 stages"));
  CHECK_THAT(err(e.bytes(), kMaxPackedCount + 1, 7, 2), Catch::Contains("count"));
  CHECK_THAT(err(e.bytes(), 2, -1, 2), Catch::Contains("base step"));
  CHECK_THAT(err(std::string("\x02\x01\x01\x00", 4), 1, 7, 2), Catch::Contains("must equal"));
  // Second step with delta 0: steps must increase.
  CHECK_THAT(err(std::string("\x00\x01\x01\x00\x00\x01\x01\x00", 8), 2, 7, 2),
             Catch::Contains("steps must increase"));
  // An 11-byte varint.
  CHECK_THAT(err(std::string(11, '\xff'), 1, 7, 2), Catch::Contains("truncated"));
  // A duration over a day.
  std::string big("\x00", 1);
  uint64_t v = 86'400'000'000'001ULL;
  while (v >= 0x80) {
    big.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  big.push_back(static_cast<char>(v));
  big += std::string("\x01\x00", 2);
  CHECK_THAT(err(big, 1, 7, 2), Catch::Contains("over a day"));
}

}  // namespace
}  // namespace stagefrontier::wire
