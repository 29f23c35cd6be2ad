#include "daemon/analyze/report_render.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/common/duration_format.h"

namespace stagefrontier {

namespace {

std::string StageName(const StageSchema& schema, int32_t k) {
  return k >= 0 && static_cast<size_t>(k) < schema.size() ? schema.stage(k).name : "-";
}

// The verdict, its explanation and what would settle it.
void RenderVerdictLines(const StageSchema& schema, const GroupReport& g, std::string* out) {
  const Verdict& v = g.verdict;
  absl::StrAppend(out, "VERDICT  ", LabelText(v), v.group_wide ? " (group-wide)" : "", "   steps ",
                  v.first_step, "..", v.last_step, " (", v.steps, " steps, ", v.flagged_steps,
                  " with excess)\n");
  if (!v.unreliable.empty()) {
    absl::StrAppend(out, "  UNRELIABLE: ", absl::StrJoin(v.unreliable, ", "), "\n");
  }
  absl::StrAppend(out, "  ", v.explanation, "\n");
  if (!v.settle.empty()) absl::StrAppend(out, "  to settle it: ", v.settle, "\n");
  if (!v.missing_ranks.empty()) {
    absl::StrAppend(out, "  ranks not reporting: ", absl::StrJoin(v.missing_ranks, ", "), " (",
                    v.partial_steps, " partial steps)\n");
  }
}

// The frontier waterfall: per stage, its mean increment, baseline, excess and leaders.
void RenderWaterfall(const StageSchema& schema, const GroupReport& g, std::string* out) {
  absl::StrAppend(out, "\nFrontier waterfall (ms per step, mean over the window)\n");
  absl::StrAppend(out,
                  absl::StrFormat("  %-14s %-8s %9s %9s %9s  %-26s %s\n", "stage", "kind", "dF",
                                  "baseline", "excess", "leaders (steps led)", "delay first seen"));
  double total = 0;
  for (size_t k = 0; k < schema.size(); ++k) {
    const StageSummary& s = g.stages[k];
    std::vector<std::string> leaders;
    for (auto [rank, steps] : s.top_leaders)
      leaders.push_back(absl::StrCat(rank, " (", steps, ")"));
    absl::StrAppend(
        out,
        absl::StrFormat("  %-14s %-8s %9s %9s %9s  %-26s %d\n", schema.stage(k).name,
                        StageKindName(schema.stage(k).kind), FormatMsNumber(s.mean_increment_ns),
                        s.baseline_ns < 0 ? "warming" : FormatMsNumber(s.baseline_ns),
                        FormatMsNumber(s.mean_excess_ns), absl::StrJoin(leaders, ", "),
                        s.first_excess_steps));
    total += s.mean_increment_ns;
  }
  absl::StrAppend(out, absl::StrFormat("  %-14s %-8s %9s   (exposed step time E = sum of dF)\n",
                                       "exposed", "", FormatMsNumber(total)));
}

// The suspects with their share, excess and what-if saving.
void RenderSuspects(const StageSchema& schema, const GroupReport& g, std::string* out) {
  const Verdict& v = g.verdict;
  absl::StrAppend(out, "\nSuspects\n");
  if (v.suspects.empty()) {
    absl::StrAppend(out, "  none: no excess above noise\n");
  } else {
    absl::StrAppend(
        out, absl::StrFormat("  %2s  %-14s %6s %7s %13s %7s %18s\n", "#", "stage", "rank", "share",
                             "excess ms/step", "steps", "what-if ms/step"));
    for (size_t i = 0; i < v.suspects.size(); ++i) {
      const Suspect& s = v.suspects[i];
      absl::StrAppend(
          out, absl::StrFormat(
                   "  %2d  %-14s %6d %6.0f%% %13s %7d %18s\n", i + 1, StageName(schema, s.stage),
                   s.rank, 100 * s.share,
                   FormatMsNumber(static_cast<double>(s.excess_ns) / std::max(1, v.steps)),
                   s.flagged_steps, FormatMsNumber(static_cast<double>(s.what_if_saving_ns))));
    }
  }
}

// What the mean and max dashboards would show beside the frontier.
void RenderDashboards(const StageSchema& schema, const GroupReport& g, std::string* out) {
  absl::StrAppend(out,
                  "\nWhat the cheap dashboards would show (ms per step; change vs their own "
                  "healthy baseline)\n");
  absl::StrAppend(
      out, absl::StrFormat("  %-14s %22s %22s\n", "stage", "mean over ranks", "max over ranks"));
  auto change = [](double now, double base) {
    return base < 0 ? absl::StrFormat("%s (n/a)", FormatMsNumber(now))
                    : absl::StrFormat("%s (%+.2f)", FormatMsNumber(now), (now - base) / 1e6);
  };
  for (size_t k = 0; k < schema.size(); ++k) {
    const StageSummary& s = g.stages[k];
    absl::StrAppend(out, absl::StrFormat("  %-14s %22s %22s\n", schema.stage(k).name,
                                         change(s.mean_dashboard_ns, s.mean_dashboard_baseline_ns),
                                         change(s.max_dashboard_ns, s.max_dashboard_baseline_ns)));
  }
  absl::StrAppend(out, "  top stage:  mean dashboard -> ", StageName(schema, g.mean_top_stage),
                  ",  max dashboard -> ", StageName(schema, g.max_top_stage), ",  frontier -> ",
                  StageName(schema, g.frontier_top_stage), "\n");
  absl::StrAppend(out, "  per-stage maxima add up to ", FormatMsNumber(g.mean_sum_of_max_ns),
                  " ms against an exposed step of ", FormatMsNumber(g.mean_exposed_ns), " ms",
                  g.mean_sum_of_max_ns > g.mean_exposed_ns * 1.02
                      ? " (the max dashboard counts waits twice)"
                      : "",
                  "\n");
}

// Rank divergence and 3-sigma outliers.
void RenderCorroboration(const StageSchema& schema, const GroupReport& g, std::string* out) {
  absl::StrAppend(out, "\nCorroboration (KAIR)\n  rank divergence, mean KS distance from peers:");
  for (size_t i = 0; i < g.divergence.size() && i < 5; ++i) {
    absl::StrAppend(out,
                    absl::StrFormat("  rank %d %s %.2f", g.divergence[i].rank,
                                    StageName(schema, g.divergence[i].stage), g.divergence[i].ks));
  }
  if (!g.divergence_all_ranks) absl::StrAppend(out, "  (suspects and outliers only)");
  absl::StrAppend(out, "\n  3-sigma outliers (stage, rank: share of steps):");
  if (g.outliers.empty()) absl::StrAppend(out, " none");
  for (size_t i = 0; i < g.outliers.size() && i < 5; ++i) {
    absl::StrAppend(out,
                    absl::StrFormat("  (%s, %d: %.0f%%)", StageName(schema, g.outliers[i].stage),
                                    g.outliers[i].rank, 100 * g.outliers[i].fraction));
  }
  absl::StrAppend(out, "\n");
}

void RenderGroup(const StageSchema& schema, const GroupReport& g, std::string* out) {
  RenderVerdictLines(schema, g, out);
  RenderWaterfall(schema, g, out);
  RenderSuspects(schema, g, out);
  RenderDashboards(schema, g, out);
  RenderCorroboration(schema, g, out);
}

nlohmann::ordered_json VerdictJson(const StageSchema& schema, const Verdict& v) {
  nlohmann::ordered_json j;
  j["group"] = v.group;
  j["first_step"] = v.first_step;
  j["last_step"] = v.last_step;
  j["steps"] = v.steps;
  j["label"] = VerdictLabelName(v.label);
  j["reason"] = AmbiguityReasonName(v.reason);
  nlohmann::ordered_json suspects = nlohmann::ordered_json::array();
  for (const Suspect& s : v.suspects) {
    suspects.push_back({{"stage", StageName(schema, s.stage)},
                        {"rank", s.rank},
                        {"share", s.share},
                        {"excess_ns", s.excess_ns},
                        {"flagged_steps", s.flagged_steps},
                        {"what_if_saving_ns_per_step", s.what_if_saving_ns}});
  }
  j["suspects"] = suspects;
  j["candidate_ranks"] = v.candidate_ranks;
  std::vector<std::string> stages;
  for (int32_t k : v.candidate_stages) stages.push_back(StageName(schema, k));
  j["candidate_stages"] = stages;
  j["evidence"] = {{"exposed_ns", v.exposed_ns},
                   {"total_excess_ns", v.total_excess_ns},
                   {"flagged_steps", v.flagged_steps},
                   {"median_margin_ns", v.median_margin_ns},
                   {"tie_tolerance_ns", v.tie_tolerance_ns},
                   {"wait_agreement", v.wait_agreement},
                   {"concurrent_ranks", v.concurrent_ranks},
                   {"partial_steps", v.partial_steps},
                   {"missing_ranks", v.missing_ranks},
                   {"rank_shift_ns", v.rank_shift_ns},
                   {"rank_z", v.rank_z}};
  j["group_wide"] = v.group_wide;
  // A job with declared groups: the group whose verdict the job's is, and a group slower by
  // construction (as sfctl shows them; empty otherwise).
  j["sync_group"] = v.sync_group;
  j["structural"] = v.structural;
  j["unreliable"] = v.unreliable;
  j["explanation"] = v.explanation;
  j["settle"] = v.settle;
  j["steps_to_profile"] = v.steps_to_profile;
  return j;
}

std::string ProfiledNote(size_t profiled) {
  if (profiled == 0) return "";
  return absl::StrCat("; ", profiled, " profiled step", profiled == 1 ? "" : "s",
                      " left out of the evidence");
}

// Profiled steps within the window's span.
int64_t ProfiledIn(const RunInfo& info, const Verdict& v) {
  if (v.steps <= 0) return 0;
  const auto& p = info.profiled_steps;
  return std::upper_bound(p.begin(), p.end(), v.last_step) -
         std::lower_bound(p.begin(), p.end(), v.first_step);
}

nlohmann::ordered_json GroupJson(const StageSchema& schema, const GroupReport& g) {
  nlohmann::ordered_json j;
  j["group"] = g.group;
  j["ranks"] = g.ranks;
  j["verdict"] = VerdictJson(schema, g.verdict);
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (size_t k = 0; k < schema.size(); ++k) {
    const StageSummary& s = g.stages[k];
    nlohmann::ordered_json leaders = nlohmann::ordered_json::array();
    for (auto [rank, steps] : s.top_leaders) leaders.push_back({{"rank", rank}, {"steps", steps}});
    stages.push_back({{"stage", schema.stage(k).name},
                      {"kind", StageKindName(schema.stage(k).kind)},
                      {"mean_increment_ns", s.mean_increment_ns},
                      {"baseline_ns", s.baseline_ns},
                      {"mean_excess_ns", s.mean_excess_ns},
                      {"top_leaders", leaders},
                      {"first_excess_steps", s.first_excess_steps},
                      {"mean_dashboard_ns", s.mean_dashboard_ns},
                      {"mean_dashboard_baseline_ns", s.mean_dashboard_baseline_ns},
                      {"max_dashboard_ns", s.max_dashboard_ns},
                      {"max_dashboard_baseline_ns", s.max_dashboard_baseline_ns}});
  }
  j["stages"] = stages;
  j["mean_exposed_ns"] = g.mean_exposed_ns;
  j["mean_sum_of_max_ns"] = g.mean_sum_of_max_ns;
  j["top_stage"] = {{"frontier", StageName(schema, g.frontier_top_stage)},
                    {"mean_dashboard", StageName(schema, g.mean_top_stage)},
                    {"max_dashboard", StageName(schema, g.max_top_stage)}};
  nlohmann::ordered_json div = nlohmann::ordered_json::array();
  for (const RankDivergence& d : g.divergence) {
    div.push_back({{"rank", d.rank}, {"stage", StageName(schema, d.stage)}, {"ks", d.ks}});
  }
  j["rank_divergence"] = div;
  j["rank_divergence_all_ranks"] = g.divergence_all_ranks;
  nlohmann::ordered_json outliers = nlohmann::ordered_json::array();
  for (const StageOutlier& o : g.outliers) {
    outliers.push_back(
        {{"stage", StageName(schema, o.stage)}, {"rank", o.rank}, {"fraction", o.fraction}});
  }
  j["outliers"] = outliers;
  return j;
}

}  // namespace

std::string RenderReportText(const RunInfo& info, const StageSchema& schema,
                             const JobReport& report, const std::vector<Verdict>& windows) {
  std::string out = absl::StrCat(
      "StageFrontier analysis of ", info.source, ": job \"", info.job, "\", ", info.world_size,
      " ranks, ", info.steps, " steps (", info.records, " rank-step records",
      ProfiledNote(info.profiled_steps.size()), ")\nschema: ", schema.ToString(), "\n\n");
  RenderGroup(schema, report.job, &out);
  for (const GroupReport& g : report.groups) {
    absl::StrAppend(&out, "\n--- sync ", g.group, " (ranks ", absl::StrJoin(g.ranks, ","),
                    ") ---\n");
    RenderGroup(schema, g, &out);
  }
  absl::StrAppend(&out, "\nWindows\n");
  for (const Verdict& v : windows) {
    std::string top = v.suspects.empty() ? ""
                                         : absl::StrCat(StageName(schema, v.suspects[0].stage), "/",
                                                        v.suspects[0].rank);
    const int64_t left_out = ProfiledIn(info, v);
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "  %-8s %6d..%-6d %-22s %s%s\n", v.group, v.first_step, v.last_step, LabelText(v), top,
            left_out == 0
                ? ""
                : absl::StrCat("  (window of ", v.steps, " steps; ", left_out, " profiled step",
                               left_out == 1 ? "" : "s", " left out)")));
  }
  return out;
}

std::string RenderReportJson(const RunInfo& info, const StageSchema& schema,
                             const JobReport& report, const std::vector<Verdict>& windows) {
  nlohmann::ordered_json j;
  j["source"] = info.source;
  j["job"] = info.job;
  j["world_size"] = info.world_size;
  j["steps"] = info.steps;
  j["records"] = info.records;
  j["schema"] = schema.ToString();
  j["report"] = GroupJson(schema, report.job);
  nlohmann::ordered_json groups = nlohmann::ordered_json::array();
  for (const GroupReport& g : report.groups) groups.push_back(GroupJson(schema, g));
  j["groups"] = groups;
  nlohmann::ordered_json w = nlohmann::ordered_json::array();
  for (const Verdict& v : windows) {
    nlohmann::ordered_json one = VerdictJson(schema, v);
    one["profiled_steps_left_out"] = ProfiledIn(info, v);
    w.push_back(std::move(one));
  }
  j["profiled_steps"] = info.profiled_steps.size();
  j["windows"] = w;
  return j.dump(2) + "\n";
}

}  // namespace stagefrontier
