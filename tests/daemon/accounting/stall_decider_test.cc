// The stall decision: every reason from where the ranks are, and no stall below the limit, for
// a finished job, or for a pause under its alarm limit.
#include "daemon/accounting/stall_decider.h"

#include <catch2/catch.hpp>
#include <vector>

namespace stagefrontier {
namespace {

constexpr int64_t kS = 1'000'000'000;

// data:io(0), forward:compute(1), backward:compute(2), grad_sync:sync(3), other_sync:sync(4),
// optimizer:compute(5).
const StageSchema& Schema() {
  static const StageSchema s = *StageSchema::Parse(
      "data:io,forward:compute,backward:compute,grad_sync:sync,other_sync:sync,optimizer:compute");
  return s;
}

RankPosition At(int64_t step, int32_t stage, int64_t open_ns = 2 * kS) {
  RankPosition p;
  p.heard = true;
  p.known = true;
  p.step = step;
  p.stage = stage;
  p.open_ns = open_ns;
  p.node = "node-a";
  return p;
}

StallDecision Decide(const std::vector<RankPosition>& ranks, int64_t since = 12 * kS) {
  return DecideStall({Schema(), ranks, since, 5 * kS, 60 * kS});
}

std::vector<int32_t> Named(const StallDecision& d, const std::string& role) {
  std::vector<int32_t> out;
  for (const NamedRank& n : d.named) {
    if (n.role == role) out.push_back(n.rank);
  }
  return out;
}

TEST_CASE("no stall below the limit, nor once every rank ended") {
  std::vector<RankPosition> ranks = {At(150, 1, 20 * kS), At(150, 3), At(150, 3)};
  CHECK(Decide(ranks, 4 * kS).kind == StallKind::kNone);
  for (RankPosition& p : ranks) p.finished = true;
  CHECK(Decide(ranks).kind == StallKind::kNone);
}

TEST_CASE("a rank in a compute stage while the others wait in the sync stage is hung") {
  const StallDecision d = Decide({At(150, 1, 23 * kS), At(150, 3, 22 * kS), At(150, 3, 22 * kS)});
  CHECK(d.kind == StallKind::kHung);
  CHECK(d.alarm);
  CHECK(Named(d, "stuck") == std::vector<int32_t>{0});
  CHECK(Named(d, "waiting") == std::vector<int32_t>{1, 2});
  CHECK(d.waiting == 2);
  CHECK(d.text ==
        "rank 0 stuck in forward of step 150 for 23.0 s; 2 ranks wait in grad_sync of "
        "step 150");
}

TEST_CASE("ranks waiting in different places are each counted where they wait") {
  // DDP's buffer broadcast: rank 1 (the authoritative rank) waits at the start of step 101's
  // forward for rank 0, stuck in its optimizer; rank 2 went on to the all-reduce. The text said
  // "2 ranks wait in other_sync of step 101" before, where the first of them was.
  const StallDecision d = Decide({At(100, 5, 20 * kS), At(101, 4), At(101, 3)});
  CHECK(d.kind == StallKind::kHung);
  CHECK(Named(d, "stuck") == std::vector<int32_t>{0});
  CHECK(d.text ==
        "rank 0 stuck in optimizer of step 100 for 20.0 s; 2 ranks wait: 1 in other_sync of "
        "step 101, 1 in grad_sync of step 101");
  // Past three places the rest is elided.
  const StageSchema four = *StageSchema::Parse("work:compute,a:sync,b:sync,c:sync,d:sync");
  const std::vector<RankPosition> ranks = {At(100, 0, 20 * kS), At(100, 1), At(100, 2),
                                           At(100, 3),          At(100, 4), At(100, 1)};
  const StallDecision many = DecideStall({four, ranks, 12 * kS, 5 * kS, 60 * kS});
  CHECK(many.text ==
        "rank 0 stuck in work of step 100 for 20.0 s; 5 ranks wait: 2 in a of step "
        "100, 1 in b of step 100, 1 in c of step 100, ...");
}

TEST_CASE("a rank stuck in its data loader, between steps, or at an earlier step is hung") {
  CHECK(Named(Decide({At(150, 3), At(151, 0, 30 * kS), At(150, 3)}), "stuck") ==
        std::vector<int32_t>{1});
  CHECK(Named(Decide({At(150, 3), At(150, 3), At(149, -1)}), "stuck") == std::vector<int32_t>{2});
  const StallDecision d = Decide({At(150, 3), At(150, 3), At(150, 3), At(149, 5)});
  CHECK(d.kind == StallKind::kHung);
  CHECK(Named(d, "stuck") == std::vector<int32_t>{3});
}

TEST_CASE("a rank inside a collective the others finished is hung at the earlier step") {
  const StallDecision d = Decide({At(150, 3, 20 * kS), At(151, 3, 9 * kS), At(151, 3, 9 * kS)});
  CHECK(d.kind == StallKind::kHung);
  CHECK(Named(d, "stuck") == std::vector<int32_t>{0});
  CHECK(d.text.find("a collective the others finished") != std::string::npos);
}

TEST_CASE("several stuck ranks are named longest first") {
  const StallDecision d = Decide({At(150, 1, 5 * kS), At(150, 3), At(150, 2, 9 * kS), At(150, 3)});
  CHECK(Named(d, "stuck") == std::vector<int32_t>{2, 0});
  CHECK(d.text.rfind("ranks 2, 0 stuck in backward of step 150 for 9.0 s", 0) == 0);
}

TEST_CASE("a dead rank is told from a stuck one") {
  std::vector<RankPosition> ranks = {At(150, 1), At(150, 3), At(150, 3)};
  ranks[0].process_gone = true;
  const StallDecision d = Decide(ranks);
  CHECK(d.kind == StallKind::kDead);
  CHECK(Named(d, "dead") == std::vector<int32_t>{0});
  CHECK(d.text ==
        "rank 0 is gone: its process died in forward of step 150 on node node-a; 2 "
        "ranks wait in grad_sync of step 150");
}

TEST_CASE("a rank that raised is named before the ranks its launcher killed after it") {
  // Rank 2's trainer ended on an uncaught exception in backward; torchrun then killed rank 0.
  std::vector<RankPosition> ranks = {At(150, 3), At(150, 3), At(150, 2), At(150, 3)};
  ranks[0].process_gone = true;
  ranks[2].process_gone = true;
  ranks[2].raised = true;
  StallDecision d = Decide(ranks);
  CHECK(d.kind == StallKind::kDead);
  CHECK(Named(d, "dead") == std::vector<int32_t>{2, 0});
  CHECK(d.text ==
        "rank 2 is gone: its trainer ended on an uncaught exception in backward of step 150 on "
        "node node-a; rank 0 is gone too; 2 ranks wait in grad_sync of step 150");
  ranks[0].process_gone = false;
  d = Decide(ranks);
  CHECK(Named(d, "dead") == std::vector<int32_t>{2});
  CHECK(d.text ==
        "rank 2 is gone: its trainer ended on an uncaught exception in backward of step 150 on "
        "node node-a; 3 ranks wait in grad_sync of step 150");
}

TEST_CASE("a rank that raised a collective's error in a compute stage is its victim too") {
  // Rank 2 was killed in backward; rank 0 raised Gloo's error from DDP's buffer broadcast at
  // the start of forward (a compute stage), rank 3 its own error in forward: rank 3 is the
  // cause, then the killed rank 2, and rank 0 (the broadcast's victim) last.
  std::vector<RankPosition> ranks = {At(151, 1), At(150, 4), At(150, 2), At(151, 1)};
  ranks[2].process_gone = true;
  ranks[0].process_gone = ranks[0].raised = ranks[0].raised_in_collective = true;
  StallDecision d = Decide(ranks);
  CHECK(Named(d, "dead") == std::vector<int32_t>{2, 0});
  CHECK(d.text.rfind("rank 2 is gone: its process died in backward of step 150", 0) == 0);
  ranks[0].raised_in_collective = false;  // as before the reason existed: named the cause
  d = Decide(ranks);
  CHECK(Named(d, "dead") == std::vector<int32_t>{0, 2});
  ranks[0].raised_in_collective = true;
  ranks[3].process_gone = ranks[3].raised = true;
  d = Decide(ranks);
  CHECK(Named(d, "dead") == std::vector<int32_t>{3, 2, 0});
}

TEST_CASE("a rank that raised inside a collective is its victim, not the cause") {
  // Rank 1 was killed in forward; Gloo then raised in ranks 0 and 3, waiting in grad_sync.
  std::vector<RankPosition> ranks = {At(150, 3), At(150, 1), At(150, 3), At(150, 3)};
  for (int r : {0, 1, 3}) ranks[r].process_gone = true;
  ranks[0].raised = ranks[3].raised = true;
  StallDecision d = Decide(ranks);
  CHECK(Named(d, "dead") == std::vector<int32_t>{1, 0, 3});
  CHECK(d.text ==
        "rank 1 is gone: its process died in forward of step 150 on node node-a; ranks 0, 3 are "
        "gone too; 1 rank waits in grad_sync of step 150");
  // One that raised in its own work comes before both.
  ranks[2].process_gone = ranks[2].raised = true;
  ranks[2].stage = 5;
  d = Decide(ranks);
  CHECK(Named(d, "dead") == std::vector<int32_t>{2, 1, 0, 3});
  CHECK(d.text.rfind("rank 2 is gone: its trainer ended on an uncaught exception in optimizer of "
                     "step 150",
                     0) == 0);
}

TEST_CASE("ranks waiting in different collectives are a desync") {
  const StallDecision d = Decide({At(150, 3), At(150, 3), At(150, 4)});
  CHECK(d.kind == StallKind::kDesync);
  CHECK(d.named.size() == 3);
  CHECK(d.text.find("grad_sync of step 150 (ranks 0, 1), other_sync of step 150 (rank 2)") !=
        std::string::npos);
  // A minority ahead by a step skipped a collective: also a desync, not the majority stuck.
  CHECK(Decide({At(150, 3), At(150, 3), At(151, 3)}).kind == StallKind::kDesync);
}

TEST_CASE("every rank in the same sync stage and step: the collective itself") {
  const StallDecision d = Decide({At(150, 3), At(150, 3)});
  CHECK(d.kind == StallKind::kCollective);
  // Nobody to blame, but the waiting ranks are named: their stacks are asked.
  CHECK(Named(d, "waiting") == std::vector<int32_t>{0, 1});
}

TEST_CASE("with no sync stage open, the few ranks behind the others are stuck") {
  // DDP waits for its all-reduce inside backward (a compute stage to the stub).
  const StallDecision d = Decide({At(150, 1, 9 * kS), At(150, 2, 8 * kS), At(150, 2, 8 * kS)});
  CHECK(d.kind == StallKind::kHung);
  CHECK(Named(d, "stuck") == std::vector<int32_t>{0});
  CHECK(Named(d, "waiting") == std::vector<int32_t>{1, 2});
  CHECK(d.text ==
        "rank 0 stuck in forward of step 150 for 9.0 s; 2 ranks further on wait for "
        "it (in backward of step 150)");
  // Between steps counts as after the last stage; an earlier step as behind.
  CHECK(Named(Decide({At(150, -1), At(150, 2), At(150, -1), At(150, -1)}), "stuck") ==
        std::vector<int32_t>{1});
  CHECK(Named(Decide({At(149, 2), At(150, 0), At(150, 0)}), "stuck") == std::vector<int32_t>{0});
  // Of two ranks, the one behind; more than half behind: nobody to blame, a pause.
  CHECK(Named(Decide({At(150, 1), At(150, 2)}), "stuck") == std::vector<int32_t>{0});
  CHECK(Decide({At(150, 1), At(150, 1), At(150, 1), At(150, 2)}).kind ==
        StallKind::kGroupWidePause);
}

TEST_CASE("a group-wide pause is no alarm until its longer limit") {
  std::vector<RankPosition> ranks = {At(150, 5), At(150, 5), At(150, 5)};
  StallDecision d = Decide(ranks, 20 * kS);
  CHECK(d.kind == StallKind::kGroupWidePause);
  CHECK_FALSE(d.alarm);
  CHECK(d.named.empty());
  CHECK(d.text ==
        "every rank in optimizer of step 150 for 20.0 s: a group-wide pause (a "
        "checkpoint, an evaluation)");
  d = Decide(ranks, 61 * kS);
  CHECK(d.alarm);
  // Between steps (an evaluation pass outside the steps) reads the same.
  CHECK(Decide({At(150, -1), At(150, -1)}).kind == StallKind::kGroupWidePause);
}

TEST_CASE("ranks whose sidecar went silent are not a hang of the job") {
  std::vector<RankPosition> ranks = {At(150, 1), At(150, 3)};
  for (RankPosition& p : ranks) p.sidecar_lost = true;
  const StallDecision d = Decide(ranks);
  CHECK(d.kind == StallKind::kSidecarLost);
  CHECK_FALSE(d.alarm);
  CHECK(Named(d, "lost") == std::vector<int32_t>{0, 1});
}

TEST_CASE("stubs that do not publish where they are: a stall of unknown cause") {
  std::vector<RankPosition> ranks(3);
  // Not heard from since the coordinator started (it restarted after the job ended): nothing.
  CHECK(Decide(ranks).kind == StallKind::kNone);
  ranks[1].heard = true;
  const StallDecision d = Decide(ranks);
  CHECK(d.kind == StallKind::kUnknown);
  CHECK(d.alarm);
}

TEST_CASE("culprits named at most kCulpritsNamed, the waiting at most kWaitingNamed") {
  std::vector<RankPosition> ranks(1000, At(150, 3));
  for (int r = 0; r < 300; ++r) ranks[r] = At(150, 1);
  const StallDecision d = Decide(ranks);
  CHECK(d.kind == StallKind::kHung);
  CHECK(Named(d, "stuck").size() == kCulpritsNamed);
  CHECK(Named(d, "waiting").size() == kWaitingNamed);
  CHECK(d.waiting == 700);
  CHECK(d.text.find("(300 in all)") != std::string::npos);
}

TEST_CASE("reason names") {
  CHECK(std::string(StallKindName(StallKind::kGroupWidePause)) == "group_wide_pause");
  CHECK(std::string(StallKindName(StallKind::kNone)).empty());
}

}  // namespace
}  // namespace stagefrontier
