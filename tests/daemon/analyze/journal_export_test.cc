// A coordinator journal read offline (`stagefrontier journal`): profiled steps are left out of
// the evidence as the coordinator leaves them out, and the windows spanning them say so.
#include "daemon/analyze/journal_export.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <memory>
#include <random>

#include "daemon/accounting/engine.h"
#include "daemon/analyze/report_render.h"
#include "daemon/coordinator/job_state.h"
#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"
#include "shm/segment_layout_v1.h"

namespace stagefrontier {
namespace {

constexpr int kWorld = 4;
constexpr char kStages[] = "data:io,forward:compute,grad_sync:sync,optimizer:compute";

// A journal of steps [0, 80) whose rank 1 profiled steps 20..29 (marked captured). With
// `pipeline_stages`, every rank's owner declares pipeline stage rank / (kWorld / P) of P, but
// rank 3 says `rank3_stages` stages when that is given (a layout that does not fit).
std::string ProfiledJournal(int32_t pipeline_stages = 0, int32_t rank3_stages = 0) {
  char dir[] = "/tmp/sf_journal_export_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  v1::RankDeclaration decl;
  decl.set_job("job-1");
  decl.set_world_size(kWorld);
  const StageSchema schema = *StageSchema::Parse(kStages);
  for (const Stage& s : schema.stages()) {
    v1::Stage* p = decl.add_stages();
    p->set_name(s.name);
    p->set_kind(static_cast<v1::StageKind>(s.kind));
  }
  JobOptions o;
  o.data_dir = dir;
  o.fsync = false;
  o.aligner.deadline_ns = 1'000'000;
  auto job = JobState::Create(decl, o, nullptr);
  REQUIRE(job.ok());
  for (int r = 0; r < kWorld && pipeline_stages > 0; ++r) {
    v1::RankDeclaration owner = decl;
    owner.set_rank(r);
    owner.set_owner_generation(1);
    v1::RankLayout* l = owner.mutable_layout();
    l->set_pipeline_stages(r == 3 && rank3_stages > 0 ? rank3_stages : pipeline_stages);
    l->set_pipeline_stage(r / (kWorld / pipeline_stages));
    l->set_tensor_size(1);
    (*job)->NoteOwner(owner, "n");
  }
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> jitter(-100'000, 100'000);
  for (int r = 0; r < kWorld; ++r) {
    wire::PackedStepsEncoder enc(4);
    for (int s = 0; s < 80; ++s) {
      int64_t d[4] = {4'000'000 + jitter(rng), 8'000'000 + jitter(rng), 300'000, 3'000'000};
      const bool profiled = r == 1 && s >= 20 && s < 30;
      enc.Add(s, d, profiled ? shm::v1::kRecordTraceCaptured : 0);
    }
    REQUIRE((*job)->Ingest(wire::MakeRankSteps("job-1", r, enc), "n", 1'000'000'000).ok());
  }
  (*job)->CloseDue(1'010'000'000);
  REQUIRE((*job)->Flush().ok());
  return JournalPath(dir, "job-1");
}

// Issue 32: a journal of a job with a declared layout is accounted offline as the coordinator
// accounted it, one sync group per role (the tool used to account it as one group).
TEST_CASE("a journal's ranks' layouts give its role groups offline") {
  absl::StatusOr<JournalRun> r = ReadJournalAsRun(ProfiledJournal(/*pipeline_stages=*/2));
  REQUIRE(r.ok());
  CHECK(r->run.groups == std::vector<std::vector<int32_t>>{{0, 1}, {2, 3}});
  CHECK(r->run.group_names == std::vector<std::string>{"pp0", "pp1"});
  CHECK(r->run.group_pipeline_stages == std::vector<int32_t>{0, 1});
  CHECK_THAT(r->notes.back(), Catch::Equals("sync groups from the ranks' layout: 2"));
  // Ranks that disagree: one group, and a note that says why.
  absl::StatusOr<JournalRun> odd = ReadJournalAsRun(ProfiledJournal(2, /*rank3_stages=*/4));
  REQUIRE(odd.ok());
  CHECK(odd->run.groups.empty());
  CHECK(odd->run.group_names.empty());
  REQUIRE_FALSE(odd->notes.empty());
  CHECK_THAT(odd->notes.back(), Catch::StartsWith("layout not applied (one group): "));
  // Without owners' layouts: one group, as before.
  absl::StatusOr<JournalRun> plain = ReadJournalAsRun(ProfiledJournal());
  REQUIRE(plain.ok());
  CHECK(plain->run.groups.empty());
  CHECK(plain->run.group_names.empty());
}

TEST_CASE("a journal's profiled steps are marked captured, and windows say how many they span") {
  absl::StatusOr<JournalRun> r = ReadJournalAsRun(ProfiledJournal());
  REQUIRE(r.ok());
  REQUIRE(r->run.steps.size() == 80);
  RunInfo info{"job-1.journal", "job-1", kWorld, 80, r->run.records, {}};
  for (const auto& [step, input] : r->run.steps) {
    CHECK(input.captured == (step >= 20 && step < 30));
    if (input.captured) info.profiled_steps.push_back(step);
  }
  REQUIRE(info.profiled_steps.size() == 10);

  // Accounted as `stagefrontier journal` does (analyze_run.cc): profiled steps left out.
  JobConfig config{*r->run.schema, kWorld, {}, {}, false, EngineConfig{}, "", {}};
  config.engine.window_steps = 50;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(config);
  REQUIRE(engine.ok());
  std::vector<Verdict> windows;
  for (const auto& [step, input] : r->run.steps) {
    if (input.captured) continue;
    REQUIRE((*engine)->AddStep(input).ok());
    for (Verdict& v : (*engine)->TakeClosedVerdicts()) windows.push_back(std::move(v));
  }
  REQUIRE(windows.size() == 1);
  CHECK(windows[0].first_step == 0);
  CHECK(windows[0].last_step == 59);
  const std::string text = RenderReportText(info, *r->run.schema, (*engine)->Report(), windows);
  CHECK_THAT(text, Catch::Contains("; 10 profiled steps left out of the evidence)"));
  CHECK_THAT(text, Catch::Contains("(window of 50 steps; 10 profiled steps left out)"));
  const std::string json = RenderReportJson(info, *r->run.schema, (*engine)->Report(), windows);
  CHECK_THAT(json, Catch::Contains("\"profiled_steps_left_out\": 10"));
  windows[0].first_step = 30;
  CHECK_THAT(RenderReportText(info, *r->run.schema, (*engine)->Report(), windows),
             !Catch::Contains("profiled steps left out)"));
}

}  // namespace
}  // namespace stagefrontier
