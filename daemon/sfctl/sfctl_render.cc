#include "daemon/sfctl/sfctl_render.h"

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/common/duration_format.h"

namespace stagefrontier {
namespace {

// A table cell in ms; "-" for a value the reply does not hold (negative).
std::string MsOrDash(double ns) { return ns < 0 ? "-" : FormatMsNumber(ns); }

// A BASE of "-" reads like a missing value; say why it is there (docs/accounting.md,
// "Baselines and noise").
constexpr char kNoBaselineNote[] =
    "  BASE -: no baseline yet for that stage: a baseline learns only from steps without excess "
    "and is used after warmup_steps (16 by default) of them, so a fault present since the first "
    "step leaves none; the excess is then judged against the peer ranks only\n";

bool AnyBaselineMissing(const v1::SuspectsReply& r) {
  for (const v1::StageDashboard& d : r.stages()) {
    if (d.baseline_ns() < 0 || d.mean_dashboard_baseline_ns() < 0 ||
        d.max_dashboard_baseline_ns() < 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string RenderJobs(const v1::ListJobsReply& reply) {
  if (reply.jobs().empty()) return "no jobs\n";
  std::string out = absl::StrFormat("%-24s %6s %8s %8s %9s %8s  %s\n", "JOB", "RANKS", "STEPS",
                                    "PARTIAL", "REPORTING", "MISSING", "LAST VERDICT");
  for (const v1::JobInfo& j : reply.jobs()) {
    absl::StrAppend(
        &out, absl::StrFormat("%-24s %6d %8d %8d %9d %8d  %s%s%s%s\n", j.job(), j.world_size(),
                              j.steps_accounted(), j.partial_steps(), j.ranks_reporting(),
                              j.ranks_missing(), j.last_label().empty() ? "-" : j.last_label(),
                              j.paused() ? " (paused)" : "",
                              // Every stub exited cleanly: over, not stalled.
                              j.state() == "finished" ? " (finished)" : "",
                              // A re-run under the same id: the earlier runs stay readable.
                              j.current() || j.job_id().empty() ? "" : " (earlier run)"));
  }
  return out;
}

std::string RenderStall(const v1::Stall& s) {
  if (s.ended()) {
    return absl::StrCat("  stall ended after ", FormatSeconds(static_cast<double>(s.stalled_ns())),
                        " (", s.reason(), ")\n");
  }
  std::string out = absl::StrCat(
      "STALLED ", s.reason(),
      s.alarm()                          ? ""
      : s.reason() == "group_wide_pause" ? " (no alarm yet)"
                                         : " (no alarm: the monitoring stopped, not the job)",
      ": no progress past step ", s.frontier_step(), " for ",
      FormatSeconds(static_cast<double>(s.stalled_ns())), " (limit ",
      FormatSeconds(static_cast<double>(s.stall_after_ns())), ")\n  ", s.text(), "\n");
  int waiting = 0;
  for (const v1::StuckRank& r : s.ranks()) {
    if (r.role() == "waiting" && ++waiting > 4) continue;  // the culprits, then a few waiting
    absl::StrAppend(&out, absl::StrFormat("  %-8s rank %d%s: %s of step %d, open %s\n", r.role(),
                                          r.rank(), r.node().empty() ? "" : " on " + r.node(),
                                          r.stage().empty() ? "between steps" : r.stage(), r.step(),
                                          FormatSeconds(static_cast<double>(r.open_ns()))));
  }
  if (waiting > 4) absl::StrAppend(&out, "  ... and ", waiting - 4, " more waiting\n");
  return out;
}

std::string RenderVerdict(const v1::Verdict& v) {
  if (v.has_stall()) {
    return absl::StrCat(
        "verdict ", v.label(), " ", v.reason(), "  (", v.group(), ", step ",
        v.stall().frontier_step(), ")\n",
        v.stall().ended() ? absl::StrCat("  ", v.explanation(), "\n") : RenderStall(v.stall()));
  }
  std::string out = absl::StrCat("verdict ", v.label(), v.reason().empty() ? "" : " ", v.reason(),
                                 v.group_wide() ? " (group-wide)" : "", "  (", v.group(),
                                 ", steps ", v.first_step(), "..", v.last_step(), ")\n");
  if (!v.unreliable().empty()) {
    absl::StrAppend(&out, "  UNRELIABLE: ", absl::StrJoin(v.unreliable(), ", "),
                    " (sfctl health explains each)\n");
  }
  if (!v.explanation().empty()) absl::StrAppend(&out, "  ", v.explanation(), "\n");
  if (!v.settle().empty()) absl::StrAppend(&out, "  to settle it: ", v.settle(), "\n");
  if (!v.missing_ranks().empty()) {
    absl::StrAppend(&out, "  missing ranks: ", absl::StrJoin(v.missing_ranks(), ","), "\n");
  }
  return out;
}

std::string WindowSpan(int32_t steps, const v1::Verdict& v) {
  std::string out = absl::StrCat("window of ", steps, " steps");
  // Profiled steps are left out of the evidence: the window then spans more steps than it has.
  if (v.profiled_steps_left_out() > 0) {
    absl::StrAppend(&out, " (", v.first_step(), "..", v.last_step(), "; ",
                    v.profiled_steps_left_out(), " profiled step",
                    v.profiled_steps_left_out() == 1 ? "" : "s", " left out)");
  }
  return out;
}

std::string RenderSuspects(const v1::SuspectsReply& r) {
  std::string out = absl::StrCat("job ", r.job(), ", ", WindowSpan(r.window(), r.verdict()), "\n");
  absl::StrAppend(&out, RenderVerdict(r.verdict()));
  if (!r.verdict().suspects().empty()) {
    absl::StrAppend(
        &out, "\nsuspects (stage on rank):\n",
        absl::StrFormat("  %-4s %-16s %6s %12s %7s %8s %16s %12s\n", "#", "STAGE", "RANK",
                        "EXCESS ms", "SHARE", "STEPS", "WHAT-IF SAVE ms", "WASTED GPU-s"));
    int i = 0;
    double wasted = 0;
    for (const v1::Suspect& s : r.verdict().suspects()) {
      absl::StrAppend(
          &out,
          absl::StrFormat("  %-4d %-16s %6d %12s %6.0f%% %8d %16s %12.2f\n", ++i, s.stage(),
                          s.rank(), MsOrDash(s.excess_ns()), 100 * s.share(), s.flagged_steps(),
                          MsOrDash(s.what_if_saving_ns()), s.wasted_gpu_seconds()));
      wasted += s.wasted_gpu_seconds();
    }
    if (wasted > 0) {
      absl::StrAppend(&out, absl::StrFormat("  cost: these suspects cost %.4f GPU-hours in this "
                                            "window (excess x the ranks that waited for it)\n",
                                            wasted / 3600));
    }
  }
  absl::StrAppend(&out,
                  "\nper stage, ms per step   frontier (exact)      | mean-over-ranks dashboard | "
                  "max-over-ranks dashboard\n",
                  absl::StrFormat("  %-14s %-8s %9s %9s %8s | %9s %9s | %9s %9s\n", "STAGE", "KIND",
                                  "ΔF", "BASE", "EXCESS", "MEAN", "BASE", "MAX", "BASE"));
  for (const v1::StageDashboard& d : r.stages()) {
    absl::StrAppend(
        &out,
        absl::StrFormat("  %-14s %-8s %9s %9s %8s | %9s %9s | %9s %9s\n", d.stage(), d.kind(),
                        MsOrDash(d.frontier_increment_ns()), MsOrDash(d.baseline_ns()),
                        MsOrDash(d.excess_ns()), MsOrDash(d.mean_dashboard_ns()),
                        MsOrDash(d.mean_dashboard_baseline_ns()), MsOrDash(d.max_dashboard_ns()),
                        MsOrDash(d.max_dashboard_baseline_ns())));
  }
  if (AnyBaselineMissing(r)) absl::StrAppend(&out, kNoBaselineNote);
  absl::StrAppend(
      &out, absl::StrFormat("  exposed step %s ms; the max dashboard's stages add up to %s ms\n",
                            MsOrDash(r.mean_exposed_ns()), MsOrDash(r.mean_sum_of_max_ns())));
  absl::StrAppend(&out, "\nwhere each view points: frontier -> ",
                  r.frontier_top_stage().empty() ? "-" : r.frontier_top_stage(),
                  ", mean dashboard -> ", r.mean_top_stage().empty() ? "-" : r.mean_top_stage(),
                  ", max dashboard -> ", r.max_top_stage().empty() ? "-" : r.max_top_stage(), "\n");
  return out;
}

std::string RenderSteps(const v1::GetStepsReply& r) {
  std::string out = absl::StrFormat("%-8s %10s %-8s %-14s", "STEP", "E ms", "PARTIAL", "FIRST");
  for (const std::string& s : r.stages()) absl::StrAppend(&out, absl::StrFormat(" %16s", s));
  absl::StrAppend(&out, "\n");
  for (const v1::StepSummary& s : r.steps()) {
    absl::StrAppend(&out,
                    absl::StrFormat("%-8d %10s %-8s %-14s", s.step(), MsOrDash(s.exposed_ns()),
                                    s.partial() ? "yes" : "", s.first_excess_stage()));
    for (const v1::StageStep& k : s.stages()) {
      absl::StrAppend(&out, absl::StrFormat(" %9s r%-5d", MsOrDash(k.increment_ns()), k.leader()));
    }
    absl::StrAppend(&out, "\n");
  }
  if (r.steps().empty()) {
    absl::StrAppend(&out, "(no steps in that range; the oldest held is ", r.oldest_held_step(),
                    ")\n");
  }
  return out;
}

namespace {

// "0-3, 6, 9-10": ranks, sorted, runs joined.
std::string RankRuns(std::vector<int32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::vector<std::string> runs;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    runs.push_back(j == i ? absl::StrCat(ranks[i]) : absl::StrCat(ranks[i], "-", ranks[j]));
    i = j + 1;
  }
  return absl::StrJoin(runs, ", ");
}

// What a RankHealth.layout_source says, for the health's "layout:" line.
const char* LayoutSourceWords(std::string_view source) {
  if (source == "declared") return "declared by the program";
  if (source == "none") return "none declared";
  if (source == "environment") return "declared in STAGEFRONTIER_LAYOUT";
  if (source == "inferred") return "inferred by stagefrontier.torch from their DDP process group";
  if (source == "data_parallel_only") {
    return "none needed: their DDP group is the whole job (data parallel only)";
  }
  if (source == "inference_off") return "none: inference off (STAGEFRONTIER_TORCH_INFER_LAYOUT=0)";
  if (source == "not_inferred") {
    return "NOT INFERRED: stagefrontier.torch could not read a layout from their DDP process "
           "group (each rank's stderr says why); declare it with STAGEFRONTIER_LAYOUT";
  }
  if (source == "no_ddp") {
    return "NOT INFERRED: their first step came before any DDP was built; declare it with "
           "STAGEFRONTIER_LAYOUT";
  }
  if (source == "refused") {
    return "REFUSED: the stub refused the layout it was given (each rank's stderr says why)";
  }
  if (source.empty()) return "not said (a stub older than the layout source)";
  return "invalid (a value the coordinator does not know)";
}

// "layout: ranks 0-3 inferred ...; ranks 4-7 NOT INFERRED: ...", or "" when there is nothing
// to tell: no rank said, or a plain job (none declared, or data parallel only, on every rank).
std::string LayoutSourceLine(const v1::GetHealthReply& r) {
  std::map<std::string, std::vector<int32_t>> by_source;
  bool worth_saying = false;
  for (const v1::RankHealth& h : r.ranks()) {
    const std::string& s = h.layout_source();
    by_source[s].push_back(h.rank());
    worth_saying = worth_saying || !(s.empty() || s == "none" || s == "data_parallel_only");
  }
  if (!worth_saying) return "";
  std::vector<std::string> parts;
  for (const auto& [source, ranks] : by_source) {
    parts.push_back(absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", RankRuns(ranks), " ",
                                 LayoutSourceWords(source)));
  }
  return absl::StrCat("layout: ", absl::StrJoin(parts, "; "), "\n");
}

}  // namespace

std::string RenderHealth(const v1::GetHealthReply& r) {
  std::string out = absl::StrFormat("job %s: %d reporting, %d lagging, %d missing", r.job(),
                                    r.reporting(), r.lagging(), r.missing());
  if (r.finished() > 0) absl::StrAppend(&out, ", ", r.finished(), " finished");
  // Every stub exited cleanly: the job is over, not stalled.
  absl::StrAppend(&out, r.state() == "finished" ? " (job finished)\n" : "\n");
  if (r.sync_groups_size() > 0) {
    // A 16,384-rank job has thousands: the first few, then how many.
    constexpr int kShown = 8;
    std::vector<std::string> shown;
    for (int g = 0; g < std::min(kShown, r.sync_groups_size()); ++g) {
      shown.push_back(absl::StrCat(r.sync_groups(g).name(), " (ranks ",
                                   absl::StrJoin(r.sync_groups(g).ranks(), ", "), ")"));
    }
    absl::StrAppend(&out, "sync groups from the declared layout: ", r.sync_groups_size(), ": ",
                    absl::StrJoin(shown, "; "), r.sync_groups_size() > kShown ? "; ..." : "", "\n");
  }
  absl::StrAppend(&out, LayoutSourceLine(r));
  if (r.detector_conditions().empty()) {
    absl::StrAppend(&out, "detector: healthy (no condition held in the latest window)\n");
  } else {
    absl::StrAppend(&out, "detector: UNRELIABLE, the latest verdict cannot be trusted:\n");
    for (const v1::DetectorCondition& d : r.detector_conditions()) {
      absl::StrAppend(&out, "  ", d.name(), ": ", d.detail(), "\n");
    }
  }
  if (r.has_selftests()) {
    const v1::SelfTestLoad& l = r.selftests();
    absl::StrAppend(&out,
                    absl::StrFormat("self-tests: %d running (at most %d a job, %d on this "
                                    "coordinator: %d now); %d delayed steps asked in the "
                                    "last hour of %d\n",
                                    l.running(), l.max_running_per_job(), l.max_running(),
                                    l.running_all(), l.steps_last_hour(), l.max_steps_per_hour()));
  }
  if (r.has_stall()) absl::StrAppend(&out, RenderStall(r.stall()));
  absl::StrAppend(
      &out,
      absl::StrFormat("%-6s %-10s %-16s %8s %7s %9s %6s %8s %7s %6s %7s %-22s %8s  %s\n", "RANK",
                      "STATE", "NODE", "LAST", "BEHIND", "ACCEPTED", "DUPS", "REFUSED", "DROPPED",
                      "TORN", "INVALID", "OPEN STAGE", "OPEN S", "NOTE"));
  for (const v1::RankHealth& h : r.ranks()) {
    // Where the rank is now: its open stage and step, and for how long (hangs).
    const std::string open =
        !h.open_known() ? "-"
                        : absl::StrCat(h.open_stage().empty() ? "(between)" : h.open_stage(), "@",
                                       h.open_step());
    const std::string age =
        h.open_known() ? absl::StrFormat("%.1f", static_cast<double>(h.open_age_ns()) / 1e9) : "-";
    absl::StrAppend(
        &out,
        absl::StrFormat("%-6d %-10s %-16s %8d %7d %9d %6d %8d %7d %6d %7d %-22s %8s  %s\n",
                        h.rank(), h.state(), h.node(), h.last_step(), h.steps_behind(),
                        h.records_accepted(), h.duplicates(), h.rejected(), h.dropped_by_writer(),
                        h.torn(), h.invalid(), open, age, h.last_error()));
  }
  // The collective probe: where it runs, then what bracketing validation found.
  std::vector<std::string> probed;
  for (const v1::RankHealth& h : r.ranks()) {
    if (!h.probe_backend().empty()) {
      probed.push_back(absl::StrFormat("%d (%s, %d sent, %d dropped)", h.rank(), h.probe_backend(),
                                       h.probe_intervals(), h.probe_dropped()));
    }
  }
  if (probed.empty() && r.probe_collectives() == 0) {
    absl::StrAppend(&out, "probe: no collective data (load libsfprobe.so to check stage marks)\n");
    return out;
  }
  absl::StrAppend(&out,
                  absl::StrFormat("probe: %d collectives checked, %d outside their stage; "
                                  "rules %s\n",
                                  r.probe_collectives(), r.probe_violations(), r.probe_rules()));
  if (!probed.empty()) absl::StrAppend(&out, "probe on ranks ", absl::StrJoin(probed, ", "), "\n");
  for (const v1::ProbeFinding& f : r.probe_findings()) {
    if (f.violations() == 0) continue;
    absl::StrAppend(&out, "  ", f.explanation(), "\n");
  }
  return out;
}

std::string RenderCaptures(const v1::ListCapturesReply& reply) {
  std::string out = absl::StrCat("captures of job ", reply.job(), " (automatic captures ",
                                 reply.automatic() ? "on" : "off", ")\n");
  if (reply.decisions().empty()) absl::StrAppend(&out, "  none decided yet\n");
  for (const v1::CaptureDecisionInfo& d : reply.decisions()) {
    if (d.asked()) {
      const bool stacks = d.kind() == "stacks";
      absl::StrAppend(&out, "  capture ", d.id(), d.manual() ? " (by hand)" : "", ": ", d.reason(),
                      d.stage().empty() || stacks ? "" : absl::StrCat("; report on ", d.stage()),
                      "\n");
      if (!d.missed().empty()) absl::StrAppend(&out, "    missed: ", d.missed(), "\n");
      std::vector<std::string> answers;
      for (const v1::RankCaptureAnswer& a : d.answers()) {
        std::string line =
            absl::StrCat("rank ", a.rank(), " ", a.state().empty() ? "no answer" : a.state());
        if (stacks && a.state() == "running") line = absl::StrCat("rank ", a.rank(), " signalled");
        if (a.state() == "done" && a.bytes() > 0)
          absl::StrAppend(&line, " (", a.bytes(), " bytes)");
        if (a.state() == "failed") {
          absl::StrAppend(&line, " (", a.error().empty() ? a.failure() : a.error(), ")");
        }
        answers.push_back(std::move(line));
      }
      if (!answers.empty()) absl::StrAppend(&out, "    ", absl::StrJoin(answers, ", "), "\n");
    } else {
      absl::StrAppend(&out, "  not captured after the window ending at step ",
                      d.verdict_last_step(), ": ", d.reason(), "\n");
    }
  }
  return out;
}

}  // namespace stagefrontier
