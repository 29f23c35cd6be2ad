// Verdict step 8: the renderer words decided fields, exactly.
#include "daemon/accounting/verdict_text.h"

#include <catch2/catch.hpp>

namespace stagefrontier {
namespace {

StageSchema Schema() { return *StageSchema::Parse("data:io,forward:compute,grad_sync:sync"); }

TEST_CASE("text: within noise, with missing ranks", "[verdict_steps]") {
  Verdict v;
  v.flagged_steps = 2;
  v.total_excess_ns = 1'500'000;
  v.exposed_ns = 3'000'000'000;
  v.missing_ranks = {6};
  VerdictDecision d;
  d.kind = VerdictKind::kWithinNoise;
  d.window_steps = 100;
  d.total_excess = 1'500'000;
  RenderVerdictText(d, Schema(), &v);
  CHECK(v.explanation ==
        "excess within noise: 2 of 100 steps carried excess, 1.50 ms in total (0.050% of "
        "exposed time); ranks not reporting: 6");
  CHECK(v.settle.empty());
}

TEST_CASE("text: CLEAR on the top cell, with the next wait's agreement", "[verdict_steps]") {
  Verdict v;
  v.suspects = {Suspect{.stage = 0, .rank = 5, .excess_ns = 3'000'000'000, .flagged_steps = 100}};
  v.median_margin_ns = 29'000'000;
  v.tie_tolerance_ns = 600'000;
  v.wait_agreement = 1.0;
  VerdictDecision d;
  d.kind = VerdictKind::kClear;
  d.window_steps = 100;
  d.stage = 0;
  d.rank = 5;
  d.share = 0.97;
  RenderVerdictText(d, Schema(), &v);
  CHECK(v.explanation ==
        "\"data\" on rank 5 holds 97% of the excess (30.00 ms per step over 100 steps, charged "
        "in 100 steps); it stands out by a median 29.00 ms (noise 0.60 ms), and it is the last "
        "to arrive at the next wait in 100% of them");
}

TEST_CASE("text: a tie of co-leaders names what would settle it", "[verdict_steps]") {
  Verdict v;
  v.candidate_ranks = {4, 13};
  v.tie_tolerance_ns = 1'000'000;
  v.steps_to_profile = {3, 4};
  VerdictDecision d;
  d.kind = VerdictKind::kCoLeaderTie;
  d.stage = 1;
  RenderVerdictText(d, Schema(), &v);
  CHECK(v.explanation ==
        "2 ranks reach the end of \"forward\" within noise of each other (1.00 ms) and share its "
        "excess: 4, 13");
  CHECK(v.settle == "profile ranks 4, 13 at steps 3, 4 to tell a shared cause from two faults");
}

TEST_CASE("text: a CLEAR carried from an earlier window says so", "[verdict_steps]") {
  Verdict v;
  v.rank_shift_ns = 1'700'000;
  v.rank_z = 3.46;
  VerdictDecision d;
  d.kind = VerdictKind::kStrongEvidence;
  d.window_steps = 100;
  d.stage = 1;
  d.rank = 9;
  d.carried = true;
  d.carried_from = 99;
  RenderVerdictText(d, Schema(), &v);
  CHECK(v.explanation ==
        "\"forward\" on rank 9 takes 1.70 ms per step longer than on its peers over 100 steps "
        "(3.5 standard errors); the ranks charged at the stage boundaries were waiting for it; "
        "named in the window ending at step 99 and still supported here");
}

TEST_CASE("text: a cell named on two windows' evidence says so", "[verdict_steps]") {
  Verdict v;
  v.label = VerdictLabel::kClear;
  v.suspects = {Suspect{.stage = 1, .rank = 3, .excess_ns = 60'000'000, .flagged_steps = 9}};
  v.median_margin_ns = 8'000'000;
  v.tie_tolerance_ns = 4'000'000;
  v.rank_shift_ns = 1'400'000;
  v.rank_z = 2.9;
  VerdictDecision d;
  d.kind = VerdictKind::kClear;
  d.window_steps = 100;
  d.stage = 1;
  d.rank = 3;
  d.share = 0.3;
  d.confirmed = true;
  RenderVerdictText(d, Schema(), &v);
  CHECK(v.explanation ==
        "\"forward\" on rank 3 holds 30% of the excess (0.60 ms per step over 100 steps, charged "
        "in 9 steps); it stands out by a median 8.00 ms (noise 4.00 ms); named on the evidence "
        "of this window and the one before (the largest charged cell has no support of its "
        "own): \"forward\" on rank 3 is 1.40 ms per step slower than its peers (2.9 standard "
        "errors) here and was slower in the window before too");
  // A window that ends HEALTHY says nothing of it.
  v.label = VerdictLabel::kHealthy;
  d.kind = VerdictKind::kP2pNeighbour;
  RenderVerdictText(d, Schema(), &v);
  CHECK(v.explanation.find("window before") == std::string::npos);
}

TEST_CASE("text: a late exit from the collective before", "[verdict_steps]") {
  Verdict v;
  v.median_margin_ns = 680'000;
  v.tie_tolerance_ns = 580'000;
  VerdictDecision d;
  d.kind = VerdictKind::kCollectiveExit;
  d.window_steps = 100;
  d.total_excess = 136'000'000;
  d.share = 0.35;
  d.stage = 2;
  d.rank = 3;
  d.previous_wait = 0;
  RenderVerdictText(d, *StageSchema::Parse("dp_sync:sync,apply:compute,loss_sync:sync"), &v);
  CHECK(v.explanation ==
        "a collective's exit spread, not a straggler: rank 3 reaches \"loss_sync\" later than "
        "its peers by a median 0.68 ms (noise 0.58 ms; 0.48 ms per step) and none of its own "
        "stages since \"dp_sync\" is slower: it left \"dp_sync\" late");
}

TEST_CASE("text: a late exit named, or the collective's spread", "[verdict_steps]") {
  Verdict v;
  VerdictDecision d;
  d.kind = VerdictKind::kLateExit;
  d.stage = 0;
  d.exit = {.rank = 3, .charged_rank = 2, .next_wait = 2, .mean_ns = 7'980'000, .z = 122.94};
  const StageSchema schema = *StageSchema::Parse("dp_sync:sync,apply:compute,loss_sync:sync");
  RenderVerdictText(d, schema, &v);
  CHECK(v.explanation ==
        "rank 3 leaves \"dp_sync\" a mean 7.98 ms after its peers (122.9 standard errors, "
        "measured against \"loss_sync\"): its own time after the collective ended; the frontier "
        "read it as a late start of rank 2, which waited least there");
  d.kind = VerdictKind::kExitSpread;
  d.exit.mean_ns = 360'000;
  d.exit.z = 5.3;
  RenderVerdictText(d, schema, &v);
  CHECK(v.explanation ==
        "a collective's exit spread, not a straggler: rank 3 leaves \"dp_sync\" a mean 0.36 ms "
        "after its peers (5.3 standard errors, measured against \"loss_sync\"), under 5% of the "
        "step; the frontier read it as a late start of rank 2, which waited least there");
}

TEST_CASE("text: rank lists are cut at 12", "[verdict_steps]") {
  std::vector<int32_t> ranks;
  for (int32_t r = 0; r < 15; ++r) ranks.push_back(r);
  CHECK(FormatRankList(ranks) == "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 3 more");
  CHECK(FormatRankList({}) == "");
}

TEST_CASE("text: no steps yet", "[verdict_steps]") {
  Verdict v;
  RenderVerdictText(VerdictDecision{}, Schema(), &v);
  CHECK(v.explanation == "no steps accounted yet");
}

}  // namespace
}  // namespace stagefrontier
