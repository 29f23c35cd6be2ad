#include "daemon/sfctl/sfctl_render.h"

#include <catch2/catch.hpp>
#include <string>

namespace stagefrontier {
namespace {

v1::SuspectsReply Reply(double baseline_ns) {
  v1::SuspectsReply r;
  r.set_job("job-1");
  r.set_window(32);
  v1::StageDashboard* d = r.add_stages();
  d->set_stage("data");
  d->set_kind("io");
  d->set_frontier_increment_ns(12e6);
  d->set_baseline_ns(baseline_ns);
  d->set_excess_ns(8e6);
  d->set_mean_dashboard_ns(5e6);
  d->set_mean_dashboard_baseline_ns(baseline_ns);
  d->set_max_dashboard_ns(12e6);
  d->set_max_dashboard_baseline_ns(baseline_ns);
  return r;
}

// Issue 30, item 10: a fault from step 0 leaves BASE "-" with nothing saying why.
TEST_CASE("suspects: a BASE of - is explained under the stage table") {
  const std::string text = RenderSuspects(Reply(-1));
  CHECK(text.find("  data           io") != std::string::npos);
  const size_t note = text.find("BASE -: no baseline yet for that stage");
  REQUIRE(note != std::string::npos);
  CHECK(note < text.find("  exposed step"));  // right under the table's rows
  CHECK(text.find("steps without excess", note) != std::string::npos);
  CHECK(text.find("peer ranks", note) != std::string::npos);
}

TEST_CASE("suspects: no note when every stage has its baselines") {
  const std::string text = RenderSuspects(Reply(4e6));
  CHECK(text.find("BASE -") == std::string::npos);
}

// Issue 30, item 10: a window of 100 steps that spans more because profiled steps were left
// out says so.
TEST_CASE("suspects: a window spanning profiled steps says how many were left out") {
  v1::SuspectsReply r = Reply(4e6);
  r.set_window(100);
  r.mutable_verdict()->set_first_step(94);
  r.mutable_verdict()->set_last_step(199);
  r.mutable_verdict()->set_steps(100);
  r.mutable_verdict()->set_profiled_steps_left_out(6);
  CHECK_THAT(
      RenderSuspects(r),
      Catch::StartsWith("job job-1, window of 100 steps (94..199; 6 profiled steps left out)\n"));
  r.mutable_verdict()->set_profiled_steps_left_out(0);
  CHECK_THAT(RenderSuspects(r), Catch::StartsWith("job job-1, window of 100 steps\n"));
  r.mutable_verdict()->set_profiled_steps_left_out(1);
  CHECK(WindowSpan(100, r.verdict()) == "window of 100 steps (94..199; 1 profiled step left out)");
}

// Issue 30, item 10: a job whose stubs all exited cleanly reads "finished", not "reporting".
TEST_CASE("jobs and health: a finished job and its ranks say finished") {
  v1::ListJobsReply jobs;
  v1::JobInfo* j = jobs.add_jobs();
  j->set_job("run");
  j->set_world_size(2);
  j->set_current(true);
  j->set_last_label("HEALTHY");
  j->set_state("finished");
  CHECK_THAT(RenderJobs(jobs), Catch::Contains("HEALTHY (finished)"));
  j->set_state("running");
  CHECK_THAT(RenderJobs(jobs), !Catch::Contains("finished"));

  v1::GetHealthReply h;
  h.set_job("run");
  h.set_finished(2);
  h.set_state("finished");
  for (int r = 0; r < 2; ++r) {
    v1::RankHealth* p = h.add_ranks();
    p->set_rank(r);
    p->set_state("finished");
    p->set_owner("none");
  }
  const std::string text = RenderHealth(h);
  CHECK_THAT(text, Catch::StartsWith(
                       "job run: 0 reporting, 0 lagging, 0 missing, 2 finished (job finished)\n"));
  CHECK_THAT(text, Catch::Contains("0      finished"));
}

// Issue 32: sfctl health says what stagefrontier.torch could not infer.
TEST_CASE("health: the layout line groups ranks by how they came by their layout") {
  v1::GetHealthReply h;
  h.set_job("pp");
  const char* sources[] = {"inferred",     "inferred", "not_inferred", "inferred",
                           "not_inferred", "no_ddp",   "bogus"};
  for (int r = 0; r < 7; ++r) {
    v1::RankHealth* p = h.add_ranks();
    p->set_rank(r);
    p->set_state("reporting");
    p->set_layout_source(sources[r]);
  }
  const std::string text = RenderHealth(h);
  CHECK_THAT(text, Catch::Contains(
                       "layout: rank 6 invalid (a value the coordinator does not know); "
                       "ranks 0-1, 3 inferred by stagefrontier.torch from their DDP process "
                       "group; rank 5 NOT INFERRED: their first step came before any DDP was "
                       "built; declare it with STAGEFRONTIER_LAYOUT; ranks 2, 4 NOT INFERRED: "
                       "stagefrontier.torch could not read a layout from their DDP process group "
                       "(each rank's stderr says why); declare it with STAGEFRONTIER_LAYOUT\n"));
  // Stubs that say nothing (older ones), and a plain job: no line.
  for (v1::RankHealth& p : *h.mutable_ranks()) p.clear_layout_source();
  CHECK_THAT(RenderHealth(h), !Catch::Contains("layout:"));
  for (v1::RankHealth& p : *h.mutable_ranks()) p.set_layout_source("none");
  h.mutable_ranks(3)->set_layout_source("data_parallel_only");
  CHECK_THAT(RenderHealth(h), !Catch::Contains("layout:"));
  h.mutable_ranks(3)->set_layout_source("no_ddp");  // one rank with something to say: all shown
  CHECK_THAT(RenderHealth(h), Catch::Contains("layout: rank 3 NOT INFERRED: their first step") &&
                                  Catch::Contains("; ranks 0-2, 4-6 none declared\n"));
}

TEST_CASE("captures: a missed capture says why") {
  v1::ListCapturesReply r;
  r.set_job("run");
  v1::CaptureDecisionInfo* d = r.add_decisions();
  d->set_id(1);
  d->set_asked(true);
  d->set_reason("CLEAR on rank 1: steps 251..255");
  d->set_missed("the job ended at step 230 before the capture's first step 251");
  CHECK_THAT(RenderCaptures(r),
             Catch::Contains("    missed: the job ended at step 230 before the capture's first "
                             "step 251\n"));
}

TEST_CASE("a stall: reason, limit, the stuck rank first, a pause without alarm") {
  v1::Stall st;
  st.set_reason("hung");
  st.set_alarm(true);
  st.set_frontier_step(149);
  st.set_stalled_ns(5'100'000'000);
  st.set_stall_after_ns(5'000'000'000);
  st.set_text("rank 0 stuck in forward of step 150 for 5.5 s");
  v1::StuckRank* r = st.add_ranks();
  r->set_rank(0);
  r->set_node("node0");
  r->set_step(150);
  r->set_stage("forward");
  r->set_open_ns(5'500'000'000);
  r->set_role("stuck");
  CHECK(RenderStall(st) ==
        "STALLED hung: no progress past step 149 for 5.1 s (limit 5.0 s)\n"
        "  rank 0 stuck in forward of step 150 for 5.5 s\n"
        "  stuck    rank 0 on node0: forward of step 150, open 5.5 s\n");
  st.set_reason("group_wide_pause");
  st.set_alarm(false);
  CHECK_THAT(RenderStall(st), Catch::StartsWith("STALLED group_wide_pause (no alarm yet): "));
  st.set_reason("sidecar_lost");
  CHECK_THAT(RenderStall(st), Catch::Contains("(no alarm: the monitoring stopped, not the job)"));
  v1::Verdict v;
  v.set_label("RESUMED");
  v.set_reason("hung");
  v.set_group("job");
  v.set_explanation("the job advanced again after a stall of 9.0 s (...)");
  *v.mutable_stall() = st;
  v.mutable_stall()->set_ended(true);
  CHECK_THAT(RenderVerdict(v), Catch::StartsWith("verdict RESUMED hung  (job, step 149)\n"));
}

}  // namespace
}  // namespace stagefrontier
