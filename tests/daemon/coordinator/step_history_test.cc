#include "daemon/coordinator/step_history.h"

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

v1::StepSummary Summary(int64_t step) {
  v1::StepSummary s;
  s.set_step(step);
  s.set_exposed_ns(3'000 + step);
  for (int k = 0; k < 3; ++k) {
    v1::StageStep* st = s.add_stages();
    st->set_increment_ns(1'000 + step * (k + 1) % 97);
    st->set_leader(static_cast<int32_t>(step % 5));
  }
  s.set_exposed_ns(s.stages(0).increment_ns() + s.stages(1).increment_ns() +
                   s.stages(2).increment_ns());
  return s;
}

std::vector<int64_t> Steps(const v1::GetStepsReply& r) {
  std::vector<int64_t> out;
  for (const v1::StepSummary& s : r.steps()) out.push_back(s.step());
  return out;
}

TEST_CASE("sealed and open steps come back the same, in order, within the range and limit") {
  StepHistory h({.max_steps = 1'000, .stage_count = 3, .block_steps = 16});
  for (int64_t s = 0; s < 100; ++s) h.Add(Summary(s * 2));  // even steps only
  CHECK(h.steps() == 100);
  CHECK(h.sealed_steps() == 96);  // six blocks of 16, four open
  CHECK(h.bytes() < 100 * Summary(0).ByteSizeLong());
  v1::GetStepsReply all;
  h.Copy(0, 1'000, 1'000, &all);
  REQUIRE(all.steps_size() == 100);
  CHECK(all.oldest_held_step() == 0);
  for (int i = 0; i < 100; ++i) {
    CHECK(all.steps(i).SerializeAsString() == Summary(i * 2).SerializeAsString());
  }
  v1::GetStepsReply part;
  h.Copy(31, 200, 5, &part);  // starts inside a block, stops at the limit
  CHECK(Steps(part) == std::vector<int64_t>{32, 34, 36, 38, 40});
  v1::GetStepsReply straddle;  // a block holding only two steps of the range comes first
  h.Copy(60, 200, 5, &straddle);
  CHECK(Steps(straddle) == std::vector<int64_t>{60, 62, 64, 66, 68});
  v1::GetStepsReply tail;
  h.Copy(190, 500, 1'000, &tail);  // the open steps, and one sealed
  CHECK(Steps(tail) == std::vector<int64_t>{190, 192, 194, 196, 198});
  v1::GetStepsReply none;
  h.Copy(500, 600, 10, &none);
  CHECK(none.steps_size() == 0);
  CHECK(none.oldest_held_step() == 0);
}

TEST_CASE("the oldest whole blocks go once the newest max_steps are held without them") {
  StepHistory h({.max_steps = 40, .stage_count = 3, .block_steps = 16});
  for (int64_t s = 0; s < 200; ++s) {
    h.Add(Summary(s));
    CHECK(h.steps() >= std::min<int64_t>(s + 1, 40));
    CHECK(h.steps() < 40 + 16);
  }
  v1::GetStepsReply r;
  h.Copy(0, 1'000, 1'000, &r);
  CHECK(r.steps_size() == h.steps());
  CHECK(r.oldest_held_step() == 200 - h.steps());
  CHECK(r.steps(r.steps_size() - 1).step() == 199);
}

TEST_CASE("Take under a lock, Fill without it: the same as Copy") {
  StepHistory h({.max_steps = 1'000, .stage_count = 3, .block_steps = 8});
  for (int64_t s = 0; s < 50; ++s) h.Add(Summary(s));
  const StepHistory::Slice slice = h.Take(10, 45, 20);
  for (int64_t s = 50; s < 300; ++s) h.Add(Summary(s));  // the history moves on meanwhile
  v1::GetStepsReply filled, copied;
  h.Fill(slice, &filled);
  CHECK(filled.steps_size() == 20);
  CHECK(filled.steps(0).step() == 10);
  CHECK(filled.steps(19).step() == 29);
  CHECK(filled.oldest_held_step() == 0);
  h.Copy(10, 45, 20, &copied);
  CHECK(Steps(copied) == Steps(filled));
  CHECK(h.decode_failures() == 0);
}

TEST_CASE("an empty history says so") {
  StepHistory h({.max_steps = 10, .stage_count = 3});
  v1::GetStepsReply r;
  h.Copy(0, 10, 10, &r);
  CHECK(r.oldest_held_step() == -1);
  CHECK(r.steps_size() == 0);
  CHECK(h.bytes() == 0);
}

}  // namespace
}  // namespace stagefrontier
