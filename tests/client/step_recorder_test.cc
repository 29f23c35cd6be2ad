// The stub's step rules with exact times (client/step_recorder.h).
#include "client/step_recorder.h"

#include <catch2/catch.hpp>
#include <vector>

namespace stagefrontier {
namespace {

std::vector<int64_t> Finish(StepRecorder& r, int64_t t, uint32_t* flags) {
  std::vector<int64_t> b(r.stage_count() + 1);
  *flags = r.Finish(t, b.data());
  return b;
}

TEST_CASE("stages run once, in order: boundaries are the real end times") {
  StepRecorder r(3);
  r.Begin(100);
  r.Enter(0, 100);
  r.Exit(0, 130);
  r.Enter(1, 130);
  r.Exit(1, 180);
  r.Enter(2, 180);
  r.Exit(2, 200);
  uint32_t flags = 0;
  CHECK(Finish(r, 205, &flags) == std::vector<int64_t>{100, 130, 180, 200});
  CHECK(flags == 0);
  CHECK(r.misuse() == 0);
}

TEST_CASE("untracked time counts toward the stage entered next") {
  StepRecorder r(2);
  r.Begin(0);
  r.Enter(0, 5);  // 5 ns before the first stage
  r.Exit(0, 10);
  r.Enter(1, 25);  // 15 ns between stages
  r.Exit(1, 30);
  uint32_t flags = 0;
  CHECK(Finish(r, 40, &flags) == std::vector<int64_t>{0, 10, 30});
}

TEST_CASE("marks: each covers the time since the previous stage ended") {
  StepRecorder r(3);
  r.Begin(1000);
  r.Mark(0, 1010);
  r.Mark(1, 1050);
  r.Mark(2, 1051);
  uint32_t flags = 0;
  CHECK(Finish(r, 1051, &flags) == std::vector<int64_t>{1000, 1010, 1050, 1051});
  CHECK(flags == 0);
}

TEST_CASE("re-entered stages are summed (gradient accumulation) and flagged") {
  StepRecorder r(3);  // forward, backward, optimizer
  r.Begin(0);
  for (int micro = 0; micro < 4; ++micro) {
    const int64_t t = micro * 30;
    r.Enter(0, t);
    r.Exit(0, t + 10);
    r.Enter(1, t + 10);
    r.Exit(1, t + 30);
  }
  r.Enter(2, 120);
  r.Exit(2, 125);
  uint32_t flags = 0;
  CHECK(Finish(r, 125, &flags) == std::vector<int64_t>{0, 40, 120, 125});
  CHECK(flags == shm::v1::kRecordStageReentered);
}

TEST_CASE("missing stages, open stages and overlaps are flagged, never fatal") {
  StepRecorder r(3);
  r.Begin(0);
  r.Enter(0, 0);
  r.Enter(1, 5);  // nested inside stage 0
  r.Exit(1, 8);
  // stage 0 left open: closed at the end of the step; stage 2 never entered
  uint32_t flags = 0;
  const auto b = Finish(r, 10, &flags);
  CHECK(b == std::vector<int64_t>{0, 10, 10, 10});  // clamped: overlaps cannot pass the end
  CHECK((flags & shm::v1::kRecordStagesOverlap) != 0);
  CHECK((flags & shm::v1::kRecordStageMissing) != 0);
}

TEST_CASE("misuse is counted and ignored") {
  StepRecorder r(2);
  r.Enter(0, 1);  // outside a step
  r.Begin(10);
  r.Enter(5, 11);  // unknown stage
  r.Exit(1, 12);   // never entered
  r.Enter(0, 12);
  r.Enter(0, 13);  // already open
  r.Mark(9, 14);
  CHECK(r.misuse() == 5);
  uint32_t flags = 0;
  CHECK(Finish(r, 20, &flags) == std::vector<int64_t>{10, 20, 20});
}

TEST_CASE("all 32 stages fit") {
  StepRecorder r(32);
  r.Begin(0);
  for (uint32_t k = 0; k < 32; ++k) r.Mark(k, k + 1);
  uint32_t flags = 0;
  const auto b = Finish(r, 32, &flags);
  CHECK(b.back() == 32);
  CHECK(flags == 0);
}

}  // namespace
}  // namespace stagefrontier
