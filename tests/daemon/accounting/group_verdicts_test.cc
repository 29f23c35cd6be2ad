// The job's verdict from its role groups' (group_verdicts.h): HEALTHY only when every group is,
// the group holding a work-stage fault before a group that waited on it, the window's figures
// kept from the job-wide accountant, every group's heatmap cells.
#include "daemon/accounting/group_verdicts.h"

#include <catch2/catch.hpp>
#include <vector>

#include "tests/daemon/accounting/window_fixture.h"

namespace stagefrontier {
namespace {

StageSchema Schema() {
  return *StageSchema::Parse("data:io,fwd:compute,recv_grad:sync,bwd:compute,recv_act:p2p");
}

Verdict Group(const char* name, VerdictLabel label, int32_t stage = 0, int32_t rank = 0,
              int64_t excess = 0) {
  Verdict v;
  v.group = name;
  v.label = label;
  v.explanation = std::string(name) + " says so.";
  if (label != VerdictLabel::kHealthy) {
    v.suspects.push_back({.stage = stage,
                          .rank = rank,
                          .excess_ns = excess,
                          .share = 1,
                          .flagged_steps = 10,
                          .what_if_saving_ns = excess / 10});
    v.candidate_ranks = {rank};
    v.total_excess_ns = excess;
    v.excess_cells.push_back(
        {.stage = stage, .rank = rank, .excess_ns = excess, .flagged_steps = 10});
  }
  return v;
}

Verdict Job() {
  Verdict v;
  v.group = "job";
  v.first_step = 100;
  v.last_step = 199;
  v.steps = 100;
  v.exposed_ns = 12345;
  v.partial_steps = 2;
  v.missing_ranks = {7};
  v.label = VerdictLabel::kClear;  // the job-wide comparison across roles: not used
  v.suspects.push_back({.stage = 0,
                        .rank = 1,
                        .excess_ns = 999,
                        .share = 1,
                        .flagged_steps = 1,
                        .what_if_saving_ns = 0});
  return v;
}

TEST_CASE("every group HEALTHY: the job is HEALTHY, whatever the job-wide comparison said") {
  std::vector<Verdict> groups = {Group("pp0", VerdictLabel::kHealthy),
                                 Group("pp1", VerdictLabel::kHealthy)};
  const Verdict v = JobVerdictFromGroups(Job(), groups, Schema());
  CHECK(v.label == VerdictLabel::kHealthy);
  CHECK(v.group == "job");
  CHECK(v.sync_group.empty());
  CHECK(v.suspects.empty());
  CHECK(v.first_step == 100);
  CHECK(v.steps == 100);
  CHECK(v.exposed_ns == 12345);
  CHECK(v.partial_steps == 2);
  CHECK(v.missing_ranks == std::vector<int32_t>{7});
  CHECK_THAT(v.explanation, Catch::Contains("Every one of the job's 2 sync groups is HEALTHY"));
  CHECK(v.total_excess_ns == 0);
}

TEST_CASE("every group HEALTHY: the groups' excess totals are kept for the steps after") {
  // Regression (node eval seed 20261128, run 4, row 2): a node slow across both groups of a
  // pipeline left each group HEALTHY; the job's verdict said no excess at all, so the node
  // shift's noise gate never let it be measured.
  std::vector<Verdict> groups = {Group("pp0", VerdictLabel::kHealthy),
                                 Group("pp1", VerdictLabel::kHealthy)};
  groups[0].total_excess_ns = 3'000'000;
  groups[0].flagged_steps = 40;
  groups[1].total_excess_ns = 2'000'000;
  groups[1].flagged_steps = 55;
  const Verdict v = JobVerdictFromGroups(Job(), groups, Schema());
  CHECK(v.label == VerdictLabel::kHealthy);
  CHECK(v.total_excess_ns == 5'000'000);
  CHECK(v.flagged_steps == 55);
}

TEST_CASE("the group with a work-stage suspect wins over a larger wait in another group") {
  std::vector<Verdict> groups = {
      Group("pp0", VerdictLabel::kClear, /*stage=*/2, /*rank=*/1, /*excess=*/9'000'000),
      Group("pp1", VerdictLabel::kClear, /*stage=*/1, /*rank=*/3, /*excess=*/5'000'000)};
  const Verdict v = JobVerdictFromGroups(Job(), groups, Schema());
  CHECK(v.label == VerdictLabel::kClear);
  CHECK(v.sync_group == "pp1");
  REQUIRE(v.suspects.size() == 1);
  CHECK(v.suspects[0].stage == 1);
  CHECK(v.suspects[0].rank == 3);
  CHECK(v.candidate_ranks == std::vector<int32_t>{3});
  CHECK_THAT(v.explanation, Catch::StartsWith("Sync group pp1: pp1 says so."));
  CHECK_THAT(v.explanation, Catch::Contains("pp0 CLEAR (recv_grad, rank 1)"));
  REQUIRE(v.excess_cells.size() == 2);
  CHECK(v.excess_cells[0].rank == 1);  // largest first, every group's
  CHECK(v.excess_cells[1].rank == 3);
}

TEST_CASE("a group whose top is a p2p transfer comes after one with a slow work stage") {
  // Regression (real 2 x 3 pipeline, a slow optimizer step on one rank): the neighbour group's
  // receive, charged in 6 noisy steps, outweighed the faulty group's apply charged in all 100.
  std::vector<Verdict> groups = {
      Group("pp0", VerdictLabel::kClear, /*stage=*/3, /*rank=*/2, /*excess=*/3'000'000),
      Group("pp1", VerdictLabel::kClear, /*stage=*/4, /*rank=*/5, /*excess=*/8'000'000)};
  const Verdict v = JobVerdictFromGroups(Job(), groups, Schema());
  CHECK(v.sync_group == "pp0");
  CHECK(v.suspects[0].rank == 2);
  CHECK_THAT(v.explanation, Catch::Contains("pp1 CLEAR (recv_act, rank 5)"));
}

TEST_CASE("between work-stage faults the larger excess wins; HEALTHY groups never do") {
  std::vector<Verdict> groups = {Group("pp0", VerdictLabel::kClear, 1, 0, 2'000'000),
                                 Group("pp1", VerdictLabel::kHealthy),
                                 Group("pp2", VerdictLabel::kAmbiguous, 3, 5, 4'000'000)};
  const Verdict v = JobVerdictFromGroups(Job(), groups, Schema());
  CHECK(v.label == VerdictLabel::kAmbiguous);
  CHECK(v.sync_group == "pp2");
  CHECK(v.suspects[0].rank == 5);
}

TEST_CASE("structural: a group slower by construction is said in words, the label unchanged") {
  std::vector<GroupWork> balanced = {{"pp0", 9e6}, {"pp1", 9.5e6}, {"pp2", 9.2e6}};
  CHECK(StructuralImbalance(balanced).empty());
  std::vector<GroupWork> small = {{"pp0", 2e6}, {"pp1", 2.5e6}};  // +25% but only 0.5 ms
  CHECK(StructuralImbalance(small).empty());
  std::vector<GroupWork> last = {{"pp0", 9e6}, {"pp1", 12e6}};
  CHECK_THAT(StructuralImbalance(last),
             Catch::Contains("sync group pp1 does 12.00 ms of its own work per step, 33% more "
                             "than the other groups' median (9.00 ms)"));
  std::vector<Verdict> groups = {Group("pp0", VerdictLabel::kHealthy),
                                 Group("pp1", VerdictLabel::kHealthy)};
  const Verdict v = JobVerdictFromGroups(Job(), groups, Schema(), last);
  CHECK(v.label == VerdictLabel::kHealthy);
  CHECK(v.suspects.empty());
  CHECK_THAT(v.structural, Catch::StartsWith("Structural: sync group pp1"));
  CHECK_THAT(v.explanation, Catch::EndsWith(v.structural));
}

TEST_CASE("own work counts io and compute stages only, of the least loaded rank") {
  testing::WindowBuilder b(2, "data:io,recv:p2p,fwd:compute,sync:sync,bwd:mixed");
  b.Step([](int m, int k) -> int64_t { return (m + 1) * (k + 1) * 1'000'000; });
  // member 0: data 1 + fwd 3 = 4 ms; member 1 (slower): 2 + 6 = 8 ms.
  CHECK(OwnWorkNs(b.window(), *StageSchema::Parse("data:io,recv:p2p,fwd:compute,sync:sync,"
                                                  "bwd:mixed")) == Approx(4e6));
}

StageSchema TensorSchema() {
  return *StageSchema::Parse("data:io,fwd:tensor,bwd:tensor,dp_sync:sync,apply:compute");
}

TEST_CASE("tensor group: each tensor position names its member of one slow tensor group") {
  // Regression (tp_loop on Gloo, 2 tensor ranks x 2 replicas, fwd slowed on rank 3): the tensor
  // group {2, 3} finishes fwd together, so pp0.tp0 sees rank 2 slow and pp0.tp1 rank 3; the
  // job read CLEAR on whichever group's excess was larger.
  const StageSchema schema = TensorSchema();
  const std::vector<std::vector<int32_t>> members = {{0, 2}, {1, 3}};
  const std::vector<Verdict> groups = {Group("pp0.tp0", VerdictLabel::kClear, 1, 2, 700),
                                       Group("pp0.tp1", VerdictLabel::kClear, 1, 3, 800)};
  Verdict job = JobVerdictFromGroups(Job(), groups, schema);
  REQUIRE(job.label == VerdictLabel::kClear);
  NameTensorGroup(members, {}, groups, schema, &job);
  CHECK(job.label == VerdictLabel::kAmbiguous);
  CHECK(job.reason == AmbiguityReason::kTie);
  CHECK(job.candidate_ranks == std::vector<int32_t>{2, 3});
  CHECK(job.candidate_stages == std::vector<int32_t>{1});
  REQUIRE(job.suspects.size() >= 2);
  CHECK(job.suspects[0].rank == 3);  // the larger excess first
  CHECK(job.suspects[1].rank == 2);
  CHECK_THAT(job.explanation, Catch::Contains("Tensor group: ranks 2, 3"));
  CHECK_THAT(job.settle, Catch::Contains("collective probe for stage \"fwd\""));
}

TEST_CASE("tensor group: one flagged tensor position names its whole tensor group") {
  // Regression (pipeline_eval tp rows, seed 20261130 + 1): a 2x3 job's fwd slowed on rank 3
  // read CLEAR on rank 2 (its tensor peer), the other tensor position's group HEALTHY.
  // Two pipeline stages x 2 tensor positions x 2 replicas: groups pp0.tp0 {0, 2}, pp0.tp1
  // {1, 3}, pp1.tp0 {4, 6}, pp1.tp1 {5, 7}.
  const StageSchema schema = TensorSchema();
  const std::vector<std::vector<int32_t>> members = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
  const std::vector<int32_t> stages = {0, 0, 1, 1};
  const std::vector<Verdict> groups = {
      Group("pp0.tp0", VerdictLabel::kClear, 1, 2, 700), Group("pp0.tp1", VerdictLabel::kHealthy),
      Group("pp1.tp0", VerdictLabel::kHealthy), Group("pp1.tp1", VerdictLabel::kHealthy)};
  Verdict job = JobVerdictFromGroups(Job(), groups, schema);
  NameTensorGroup(members, stages, groups, schema, &job);
  CHECK(job.label == VerdictLabel::kAmbiguous);
  CHECK(job.candidate_ranks == std::vector<int32_t>{2, 3});
  CHECK(job.suspects[0].rank == 2);
  // Flagged tensor positions in two pipeline stages: not one tensor group.
  const std::vector<Verdict> two = {
      Group("pp0.tp0", VerdictLabel::kClear, 1, 2, 700), Group("pp0.tp1", VerdictLabel::kHealthy),
      Group("pp1.tp0", VerdictLabel::kClear, 1, 6, 600), Group("pp1.tp1", VerdictLabel::kHealthy)};
  Verdict other = JobVerdictFromGroups(Job(), two, schema);
  NameTensorGroup(members, stages, two, schema, &other);
  CHECK(other.label == VerdictLabel::kClear);
}

TEST_CASE("tensor group: left alone unless every unhealthy group names the same tensor cell") {
  const StageSchema schema = TensorSchema();
  const std::vector<std::vector<int32_t>> members = {{0, 2}, {1, 3}};
  auto named = [&](const std::vector<Verdict>& groups) {
    Verdict job = JobVerdictFromGroups(Job(), groups, schema);
    const Verdict before = job;
    NameTensorGroup(members, {}, groups, schema, &job);
    return job.candidate_ranks != before.candidate_ranks || job.label != before.label;
  };
  // A fault in the rank's own data stage: its group names it there (the tensor peer waited).
  CHECK_FALSE(named({Group("pp0.tp0", VerdictLabel::kClear, 1, 2, 700),
                     Group("pp0.tp1", VerdictLabel::kClear, 0, 3, 800)}));
  // Different replicas: two faults, not one tensor group.
  CHECK_FALSE(named({Group("pp0.tp0", VerdictLabel::kClear, 1, 0, 700),
                     Group("pp0.tp1", VerdictLabel::kClear, 1, 3, 800)}));
  // Different tensor stages.
  CHECK_FALSE(named({Group("pp0.tp0", VerdictLabel::kClear, 1, 2, 700),
                     Group("pp0.tp1", VerdictLabel::kClear, 2, 3, 800)}));
  // One group alone, the other HEALTHY, no pipeline stages known: nothing to put together.
  CHECK_FALSE(named({Group("pp0.tp0", VerdictLabel::kHealthy),
                     Group("pp0.tp1", VerdictLabel::kClear, 1, 3, 800)}));
  // Not a tensor stage (compute): each group's rank is its own.
  const StageSchema compute =
      *StageSchema::Parse("data:io,fwd:compute,bwd:tensor,dp_sync:sync,apply:compute");
  const std::vector<Verdict> groups = {Group("pp0.tp0", VerdictLabel::kClear, 1, 2, 700),
                                       Group("pp0.tp1", VerdictLabel::kClear, 1, 3, 800)};
  Verdict job = JobVerdictFromGroups(Job(), groups, compute);
  NameTensorGroup(members, {}, groups, compute, &job);
  CHECK(job.label == VerdictLabel::kClear);
}

}  // namespace
}  // namespace stagefrontier
