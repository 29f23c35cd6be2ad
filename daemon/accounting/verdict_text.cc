#include "daemon/accounting/verdict_text.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/common/duration_format.h"

namespace stagefrontier {
namespace {

std::string ProfileHint(const Verdict& v, const std::vector<int32_t>& ranks) {
  return absl::StrCat("profile ranks ", FormatRankList(ranks), " at steps ",
                      absl::StrJoin(v.steps_to_profile, ", "));
}

void AppendMissing(Verdict* v) {
  if (!v->missing_ranks.empty()) {
    absl::StrAppend(&v->explanation, "; ranks not reporting: ", FormatRankList(v->missing_ranks));
  }
}

void WithinNoiseText(const VerdictDecision& d, Verdict* v) {
  v->explanation = absl::StrCat(
      "excess within noise: ", v->flagged_steps, " of ", d.window_steps, " steps carried excess, ",
      FormatMs(v->total_excess_ns), " in total (",
      absl::StrFormat("%.3f%%", 100.0 * d.total_excess / std::max<double>(1, v->exposed_ns)),
      " of exposed time)");
  AppendMissing(v);
}

std::string NoRankWords(const VerdictDecision& d, const StageSchema& schema, const Verdict& v) {
  return absl::StrFormat(
      "no rank stands out: the top suspect (%s, rank %d) is %s per step slower than its "
      "peers, %.1f standard errors",
      schema.stage(d.stage).name, d.rank, FormatMs(v.rank_shift_ns), v.rank_z);
}

void GroupWideText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  const GroupShift& g = d.group;
  const std::string& stage = schema.stage(g.stage).name;
  v->explanation = absl::StrFormat(
      "the whole group is slower: the median exposed step is %s, %s above its baseline "
      "(steps vary by %s), most of the excess in \"%s\"; %s",
      FormatMs(static_cast<int64_t>(g.step_ns)), FormatMs(static_cast<int64_t>(g.shift_ns)),
      FormatMs(static_cast<int64_t>(g.spread_ns)), stage, NoRankWords(d, schema, *v));
  v->settle = absl::StrCat("the whole group is slower in \"", stage,
                           "\" (a slow collective, network or shared resource): no "
                           "rank-targeted action applies; profile any rank at steps ",
                           absl::StrJoin(v->steps_to_profile, ", "));
}

void GroupSpreadText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  const GroupShift& g = d.group;
  v->explanation = absl::StrCat(
      "excess spread over the group, not a straggler: ", v->flagged_steps, " of ", d.window_steps,
      " steps carried excess (", FormatMs(v->total_excess_ns), "), the median exposed step (",
      FormatMs(static_cast<int64_t>(g.step_ns)), ") is ",
      g.warm ? absl::StrCat(FormatMs(static_cast<int64_t>(g.shift_ns)),
                            " from its baseline (steps vary by ",
                            FormatMs(static_cast<int64_t>(g.spread_ns)),
                            g.beyond_jitter ? ")" : ": within that jitter)")
             : std::string("not yet compared with a baseline"),
      ", and ", NoRankWords(d, schema, *v));
  AppendMissing(v);
}

void StrongEvidenceText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  v->explanation = absl::StrFormat(
      "\"%s\" on rank %d takes %s per step longer than on its peers over %d steps (%.1f "
      "standard errors); the ranks charged at the stage boundaries were waiting for it",
      schema.stage(d.stage).name, d.rank, FormatMs(v->rank_shift_ns), d.window_steps, v->rank_z);
  if (d.carried) {
    absl::StrAppend(&v->explanation, "; named in the window ending at step ", d.carried_from,
                    " and still supported here");
  }
}

void ProbeSettledText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  const ProbeSettlement& p = d.probe;
  v->explanation = absl::StrFormat(
      "\"%s\" is led by ranks %s within noise of each other, but the collective probe shows "
      "rank %d arriving last at \"%s\"'s collective (the shortest wait) in %d of %d steps: "
      "rank %d made the others wait",
      schema.stage(d.stage).name, FormatRankList(p.tied_ranks), p.rank,
      schema.stage(p.at_stage).name, p.steps, p.evidence, p.rank);
}

void ClearText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  const Suspect& s = v->suspects[0];
  v->explanation = absl::StrFormat(
      "\"%s\" on rank %d holds %.0f%% of the excess (%s per step over %d steps, charged in %d "
      "steps); it stands out by a median %s (noise %s)",
      schema.stage(d.stage).name, d.rank, 100.0 * d.share,
      FormatMs(s.excess_ns / static_cast<int64_t>(d.window_steps)), d.window_steps, s.flagged_steps,
      FormatMs(v->median_margin_ns), FormatMs(v->tie_tolerance_ns));
  if (v->wait_agreement >= 0) {
    absl::StrAppend(&v->explanation,
                    absl::StrFormat(", and it is the last to arrive at the next wait in %.0f%% "
                                    "of them",
                                    100.0 * v->wait_agreement));
  }
}

void P2pNeighbourText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  const Suspect& s = v->suspects[0];
  const bool tensor = schema.stage(d.stage).kind == StageKind::kTensor;
  v->explanation = absl::StrFormat(
      "excess in a %s, not a straggler: \"%s\" on rank %d holds %.0f%% of the excess (%s per "
      "step over %d steps, charged in %d steps), but it is the last to arrive at the next wait "
      "in %.0f%% of them: it waited on %s and held nobody in its group back",
      tensor ? "tensor-group collective" : "pipeline transfer", schema.stage(d.stage).name, d.rank,
      100.0 * d.share, FormatMs(s.excess_ns / static_cast<int64_t>(d.window_steps)), d.window_steps,
      s.flagged_steps, 100.0 * v->wait_agreement,
      tensor ? "its tensor group" : "its pipeline neighbour");
}

void PipelineWaitText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  v->explanation = absl::StrCat(
      "a pipeline rank's arrival, not a straggler: rank ", d.rank, " reaches \"",
      schema.stage(d.stage).name, "\" later than its peers by only ", FormatMs(v->median_margin_ns),
      " (noise ", FormatMs(v->tie_tolerance_ns),
      ") and none of its own io or compute stages is slower: its arrival follows the ranks it "
      "waits on outside its group (pipeline neighbours, its tensor group)");
}

void CollectiveExitText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  const std::string& before = schema.stage(static_cast<size_t>(d.previous_wait)).name;
  const int64_t per_step =
      d.window_steps > 0 ? static_cast<int64_t>(d.share * d.total_excess / d.window_steps) : 0;
  v->explanation =
      absl::StrCat("a collective's exit spread, not a straggler: rank ", d.rank, " reaches \"",
                   schema.stage(d.stage).name, "\" later than its peers by a median ",
                   FormatMs(v->median_margin_ns), " (noise ", FormatMs(v->tie_tolerance_ns), "; ",
                   FormatMs(per_step), " per step) and none of its own stages since \"", before,
                   "\" is slower: it left \"", before, "\" late");
}

std::string ExitLagWords(const VerdictDecision& d, const StageSchema& schema) {
  return absl::StrCat("rank ", d.exit.rank, " leaves \"", schema.stage(d.stage).name, "\" a mean ",
                      FormatMs(static_cast<int64_t>(d.exit.mean_ns)), " after its peers (",
                      absl::StrFormat("%.1f", d.exit.z), " standard errors, measured against \"",
                      schema.stage(static_cast<size_t>(d.exit.next_wait)).name, "\")");
}

void ExitSpreadText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  v->explanation =
      absl::StrCat("a collective's exit spread, not a straggler: ", ExitLagWords(d, schema),
                   ", under ", absl::StrFormat("%.0f%%", 100 * kExitSpreadMaterial),
                   " of the step; the frontier read it as a late start of rank ",
                   d.exit.charged_rank, ", which waited least there");
}

void LateExitText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  v->explanation = absl::StrCat(
      ExitLagWords(d, schema),
      ": its own time after the collective ended; the frontier read it as a late start of rank ",
      d.exit.charged_rank, ", which waited least there");
}

void MixedSyncText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  const std::string& stage = schema.stage(d.stage).name;
  v->explanation = absl::StrCat(
      "the excess sits in \"", stage, "\", a mixed stage (",
      FormatMs(static_cast<int64_t>(d.stage_excess / static_cast<double>(d.window_steps))),
      " per step): its local work and its collective wait cannot be separated from stage "
      "marks, so the rank that made the others wait is unknown; candidates: ",
      FormatRankList(v->candidate_ranks));
  v->settle = absl::StrCat("enable the collective probe for stage \"", stage,
                           "\" (or split it into local work and a separate sync stage), then ",
                           ProfileHint(*v, v->candidate_ranks));
}

void CoLeaderTieText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  const std::string& stage = schema.stage(d.stage).name;
  const std::vector<int32_t>& co = v->candidate_ranks;
  v->explanation = absl::StrCat(co.size(), " ranks reach the end of \"", stage,
                                "\" within noise of each other (", FormatMs(v->tie_tolerance_ns),
                                ") and share its excess: ", FormatRankList(co));
  v->settle = d.whole_group_tied
                  ? absl::StrCat("the whole group is slower in \"", stage,
                                 "\" (a slow collective, network or shared resource); ",
                                 "enable the probe or profile any rank at steps ",
                                 absl::StrJoin(v->steps_to_profile, ", "))
                  : absl::StrCat(ProfileHint(*v, co), " to tell a shared cause from two faults");
}

void SplitText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  std::vector<std::string> parts;
  for (const SplitPart& p : d.split) {
    parts.push_back(absl::StrFormat("(%s, rank %d) %.0f%%", schema.stage(p.stage).name, p.rank,
                                    100.0 * p.share));
  }
  v->explanation =
      absl::StrCat("the excess is split between candidates: ", absl::StrJoin(parts, ", "));
  v->settle = absl::StrCat(ProfileHint(*v, v->candidate_ranks),
                           "; each candidate is a separate fault until shown otherwise");
}

void MarginTieText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  v->explanation =
      absl::StrCat("rank ", d.rank, " leads \"", schema.stage(d.stage).name, "\" by only ",
                   FormatMs(v->median_margin_ns), " (noise ", FormatMs(v->tie_tolerance_ns),
                   "): others reach the boundary about as late");
  v->settle = ProfileHint(*v, v->candidate_ranks);
}

void ConcurrentText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  std::vector<int32_t> both = {d.rank};
  both.insert(both.end(), v->concurrent_ranks.begin(), v->concurrent_ranks.end());
  v->explanation = absl::StrFormat(
      "rank %d leads \"%s\", but at the next wait it is the sole last arriver in only %.0f%% "
      "of those steps; ranks %s arrive late too: the lead may have run alongside another delay",
      d.rank, schema.stage(d.stage).name, 100.0 * v->wait_agreement,
      FormatRankList(v->concurrent_ranks));
  v->settle = absl::StrCat("enable the collective probe to see who arrives last, or ",
                           ProfileHint(*v, both));
}

void RenderKindText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  switch (d.kind) {
    case VerdictKind::kNoSteps:
      v->explanation = "no steps accounted yet";
      return;
    case VerdictKind::kWithinNoise:
      return WithinNoiseText(d, v);
    case VerdictKind::kGroupSpread:
      return GroupSpreadText(d, schema, v);
    case VerdictKind::kGroupWide:
      return GroupWideText(d, schema, v);
    case VerdictKind::kStrongEvidence:
      return StrongEvidenceText(d, schema, v);
    case VerdictKind::kProbeSettled:
      return ProbeSettledText(d, schema, v);
    case VerdictKind::kClear:
      return ClearText(d, schema, v);
    case VerdictKind::kMixedSync:
      return MixedSyncText(d, schema, v);
    case VerdictKind::kCoLeaderTie:
      return CoLeaderTieText(d, schema, v);
    case VerdictKind::kSplit:
      return SplitText(d, schema, v);
    case VerdictKind::kMarginTie:
      return MarginTieText(d, schema, v);
    case VerdictKind::kConcurrent:
      return ConcurrentText(d, schema, v);
    case VerdictKind::kP2pNeighbour:
      return P2pNeighbourText(d, schema, v);
    case VerdictKind::kPipelineWait:
      return PipelineWaitText(d, schema, v);
    case VerdictKind::kCollectiveExit:
      return CollectiveExitText(d, schema, v);
    case VerdictKind::kExitSpread:
      return ExitSpreadText(d, schema, v);
    case VerdictKind::kLateExit:
      return LateExitText(d, schema, v);
  }
}

}  // namespace

std::string FormatMs(int64_t ns) {
  return absl::StrFormat("%.2f ms", static_cast<double>(ns) / 1e6);
}

std::string FormatRankList(const std::vector<int32_t>& ranks, size_t limit) {
  std::vector<int32_t> shown(ranks.begin(), ranks.begin() + std::min(limit, ranks.size()));
  std::string out = absl::StrJoin(shown, ", ");
  if (ranks.size() > limit) absl::StrAppend(&out, " and ", ranks.size() - limit, " more");
  return out;
}

void RenderVerdictText(const VerdictDecision& d, const StageSchema& schema, Verdict* v) {
  RenderKindText(d, schema, v);
  if (d.confirmed && v->label != VerdictLabel::kHealthy) {
    absl::StrAppend(
        &v->explanation,
        absl::StrFormat("; named on the evidence of this window and the one "
                        "before (the largest charged cell has no support of its "
                        "own): \"%s\" on rank %d is %s per step slower than its "
                        "peers (%.1f standard errors) here and was slower in the "
                        "window before too",
                        schema.stage(d.stage).name, d.rank, FormatMs(v->rank_shift_ns), v->rank_z));
  }
}

}  // namespace stagefrontier
