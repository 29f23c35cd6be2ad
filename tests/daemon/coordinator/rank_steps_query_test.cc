// GetRankSteps on a real job: each rank's recorded stage durations as ingested, whole steps
// up to the limit with where to go on, the steps no longer held said, bad requests refused
// with their own codes.
#include "daemon/coordinator/rank_steps_query.h"

#include <catch2/catch.hpp>
#include <cstdlib>

#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"

namespace stagefrontier {
namespace {

constexpr int kWorld = 8;
constexpr int kStages = 3;

v1::RankDeclaration Decl() {
  v1::RankDeclaration d;
  d.set_job("job-1");
  d.set_rank(0);
  d.set_world_size(kWorld);
  const StageSchema schema = *StageSchema::Parse("data:io,forward:compute,grad_sync:sync");
  for (const Stage& s : schema.stages()) {
    v1::Stage* p = d.add_stages();
    p->set_name(s.name);
    p->set_kind(static_cast<v1::StageKind>(s.kind));
  }
  return d;
}

// What rank r records for stage k of step s: distinct for every (step, rank, stage).
int64_t Duration(int64_t s, int r, int k) { return 1'000'000 * (k + 1) + 1'000 * r + s; }

struct Fixture {
  explicit Fixture(int64_t history_rank_steps = 1'000'000) {
    char dir[] = "/tmp/sf_ranksteps_XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    JobOptions o;
    o.data_dir = dir;
    o.fsync = false;
    o.aligner.deadline_ns = 1'000;
    o.history_rank_steps = history_rank_steps;
    auto j = JobState::Create(Decl(), o, nullptr);
    REQUIRE(j.ok());
    job = *std::move(j);
  }
  // Steps [first, last] from every rank but `skip` in step `skip_step`; then closes them.
  void Run(int first, int last, int skip = -1, int skip_step = -1) {
    for (int r = 0; r < kWorld; ++r) {
      wire::PackedStepsEncoder enc(kStages);
      for (int s = first; s <= last; ++s) {
        if (r == skip && s == skip_step) continue;
        int64_t d[kStages];
        for (int k = 0; k < kStages; ++k) d[k] = Duration(s, r, k);
        enc.Add(s, d, 0);
      }
      REQUIRE(job->Ingest(wire::MakeRankSteps("job-1", r, enc), "n", now).ok());
    }
    now += 1'000'000;
    job->CloseDue(now);
  }
  v1::GetRankStepsRequest Request(int64_t from, int64_t to, int32_t limit = 0) const {
    v1::GetRankStepsRequest req;
    req.set_job("job-1");
    req.set_from_step(from);
    req.set_to_step(to);
    req.set_limit(limit);
    return req;
  }
  std::unique_ptr<JobState> job;
  int64_t now = 1'000'000'000;
};

TEST_CASE("every rank's recorded durations, by rank, in stage order") {
  Fixture f;
  f.Run(0, 19, /*skip=*/5, /*skip_step=*/7);
  v1::GetRankStepsReply r;
  REQUIRE(FillRankSteps(*f.job, f.Request(5, 9), &r).ok());
  REQUIRE(r.stages_size() == kStages);
  CHECK(r.stages(0).name() == "data");
  CHECK(r.stages(2).kind() == v1::STAGE_KIND_SYNC);
  CHECK(r.world_size() == kWorld);
  CHECK(r.oldest_held_step() == 0);
  CHECK(r.next_step() == -1);
  REQUIRE(r.steps_size() == 5);
  for (int i = 0; i < r.steps_size(); ++i) {
    const v1::StepRecords& s = r.steps(i);
    CHECK(s.step() == 5 + i);
    // Step 7 closed without rank 5 (a partial step): its record is absent.
    REQUIRE(s.ranks_size() == (s.step() == 7 ? kWorld - 1 : kWorld));
    int previous = -1;
    for (const v1::RankRecord& rec : s.ranks()) {
      CHECK(rec.rank() > previous);
      previous = rec.rank();
      CHECK(!(s.step() == 7 && rec.rank() == 5));
      REQUIRE(rec.durations_ns_size() == kStages);
      for (int k = 0; k < kStages; ++k) {
        CHECK(rec.durations_ns(k) == Duration(s.step(), rec.rank(), k));
      }
    }
  }

  // Only the ranks asked.
  v1::GetRankStepsRequest req = f.Request(0, 100);
  req.add_ranks(6);
  req.add_ranks(1);
  REQUIRE(FillRankSteps(*f.job, req, &r).ok());
  REQUIRE(r.steps_size() == 20);
  for (const v1::StepRecords& s : r.steps()) {
    REQUIRE(s.ranks_size() == 2);
    CHECK(s.ranks(0).rank() == 1);
    CHECK(s.ranks(1).rank() == 6);
  }
}

TEST_CASE("the limit cuts whole steps and says where to go on") {
  Fixture f;
  f.Run(0, 19);
  v1::GetRankStepsReply r;
  REQUIRE(FillRankSteps(*f.job, f.Request(2, 19, /*limit=*/20), &r).ok());
  REQUIRE(r.steps_size() == 2);  // 8 rank-steps each: a third would pass 20
  CHECK(r.steps(1).step() == 3);
  CHECK(r.next_step() == 4);
  // Following next_step walks the whole range once.
  int64_t from = 2, seen = 0;
  while (from >= 0) {
    REQUIRE(FillRankSteps(*f.job, f.Request(from, 19, 20), &r).ok());
    for (const v1::StepRecords& s : r.steps()) CHECK(s.step() == 2 + seen++);
    from = r.next_step();
  }
  CHECK(seen == 18);
}

TEST_CASE("steps no longer held: oldest_held_step says where the records begin") {
  Fixture f(/*history_rank_steps=*/10 * kWorld);
  f.Run(0, 29);
  v1::GetRankStepsReply r;
  REQUIRE(FillRankSteps(*f.job, f.Request(0, 100), &r).ok());
  CHECK(r.oldest_held_step() == 20);
  REQUIRE(r.steps_size() == 10);
  CHECK(r.steps(0).step() == 20);
  REQUIRE(FillRankSteps(*f.job, f.Request(0, 9), &r).ok());
  CHECK(r.steps().empty());
  CHECK(r.oldest_held_step() == 20);
  CHECK(r.next_step() == -1);
}

TEST_CASE("bad requests: range, limit, ranks") {
  Fixture f;
  f.Run(0, 4);
  v1::GetRankStepsReply r;
  auto code = [&](const v1::GetRankStepsRequest& req) {
    return FillRankSteps(*f.job, req, &r).code();
  };
  CHECK(code(f.Request(5, 4)) == absl::StatusCode::kInvalidArgument);
  CHECK(code(f.Request(0, 4, -1)) == absl::StatusCode::kInvalidArgument);
  CHECK(code(f.Request(0, 4, kMaxRankStepsLimit + 1)) == absl::StatusCode::kInvalidArgument);
  // A step of every rank (8) cannot fit a limit of 4: name fewer ranks.
  absl::Status s = FillRankSteps(*f.job, f.Request(0, 4, 4), &r);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("name at most 4 ranks"));
  v1::GetRankStepsRequest req = f.Request(0, 4, 4);
  req.add_ranks(0);
  req.add_ranks(3);
  CHECK(code(req) == absl::StatusCode::kOk);
  req.add_ranks(kWorld);
  s = FillRankSteps(*f.job, req, &r);
  CHECK(s.code() == absl::StatusCode::kOutOfRange);
  CHECK_THAT(std::string(s.message()), Catch::Contains("rank 8 is outside world size 8"));
  CHECK(r.steps().empty());
  req = f.Request(0, 4);
  req.add_ranks(2);
  req.add_ranks(2);
  CHECK(code(req) == absl::StatusCode::kInvalidArgument);
  req = f.Request(0, 4);
  req.add_ranks(-1);
  CHECK(code(req) == absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace stagefrontier
