#include "daemon/accounting/group_verdicts.h"

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/accounting/suspects.h"
#include "daemon/accounting/verdict_text.h"

namespace stagefrontier {

namespace {

// The top suspect's stage, if it names one of the schema's.
std::optional<size_t> TopStage(const Verdict& v, const StageSchema& schema) {
  if (v.suspects.empty() || v.suspects[0].stage < 0 ||
      static_cast<size_t>(v.suspects[0].stage) >= schema.size()) {
    return std::nullopt;
  }
  return static_cast<size_t>(v.suspects[0].stage);
}

// Larger is more likely the fault's own group.
std::tuple<bool, bool, int64_t> Weight(const Verdict& v, const StageSchema& schema) {
  // A wait, a p2p transfer or a tensor stage is time spent on other ranks (the group's, a
  // pipeline neighbour's, the tensor group's); io, compute and mixed stages hold the group's
  // own work.
  const std::optional<size_t> k = TopStage(v, schema);
  const bool work = k && !schema.IsWait(*k) && !schema.WaitsOutsideGroup(*k);
  const int64_t excess = v.suspects.empty() ? v.total_excess_ns : v.suspects[0].excess_ns;
  return {work, !v.group_wide, excess};
}

std::string Brief(const Verdict& v, const StageSchema& schema) {
  std::string s = absl::StrCat(v.group, " ", LabelText(v));
  if (const std::optional<size_t> k = TopStage(v, schema)) {
    absl::StrAppend(&s, " (", schema.stage(*k).name, ", rank ", v.suspects[0].rank, ")");
  }
  return s;
}

}  // namespace

double OwnWorkNs(const AccountingWindow& window, const StageSchema& schema) {
  std::vector<double> total(static_cast<size_t>(window.members()), 0);
  std::vector<int64_t> steps(static_cast<size_t>(window.members()), 0);
  for (size_t i = 0; i < window.size(); ++i) {
    for (int m = 0; m < window.members(); ++m) {
      if (!window.present(i, m)) continue;
      ++steps[m];
      for (int k = 0; k < window.stages(); ++k) {
        const StageKind kind = schema.stage(static_cast<size_t>(k)).kind;
        if (kind == StageKind::kIo || kind == StageKind::kCompute) {
          total[m] += static_cast<double>(window.duration(i, m, k));
        }
      }
    }
  }
  // The least loaded replica's: one slow rank (a straggler) must not make its group look
  // heavier by construction.
  double least = -1;
  for (size_t m = 0; m < total.size(); ++m) {
    if (steps[m] == 0) continue;
    const double mean = total[m] / static_cast<double>(steps[m]);
    if (least < 0 || mean < least) least = mean;
  }
  return std::max(least, 0.0);
}

std::string StructuralImbalance(std::span<const GroupWork> groups) {
  constexpr double kMinRatio = 1.15;
  constexpr double kMinGapNs = 1e6;
  if (groups.size() < 2) return "";
  const GroupWork* top = &groups[0];
  for (const GroupWork& g : groups) {
    if (g.work_ns > top->work_ns) top = &g;
  }
  // The top against the median of the others (with two groups, the other one).
  std::vector<double> work;
  for (const GroupWork& g : groups) {
    if (&g != top) work.push_back(g.work_ns);
  }
  std::sort(work.begin(), work.end());
  const double median = work.size() % 2 == 1
                            ? work[work.size() / 2]
                            : (work[work.size() / 2 - 1] + work[work.size() / 2]) / 2;
  if (top->work_ns < kMinRatio * median || top->work_ns - median < kMinGapNs) return "";
  return absl::StrFormat(
      "Structural: sync group %s does %.2f ms of its own work per step, %.0f%% more than the "
      "other groups' median (%.2f ms): it is slower by construction (the pipeline's partition), "
      "not by any rank; evening the partition out would shorten every step.",
      top->group, top->work_ns / 1e6, 100.0 * (top->work_ns / median - 1), median / 1e6);
}

Verdict JobVerdictFromGroups(const Verdict& job, std::span<const Verdict> groups,
                             const StageSchema& schema, std::span<const GroupWork> work) {
  Verdict out;
  out.structural = StructuralImbalance(work);
  out.group = job.group;
  out.first_step = job.first_step;
  out.last_step = job.last_step;
  out.steps = job.steps;
  out.exposed_ns = job.exposed_ns;
  out.partial_steps = job.partial_steps;
  out.missing_ranks = job.missing_ranks;
  out.unreliable = job.unreliable;
  for (const Verdict& g : groups) {
    out.excess_cells.insert(out.excess_cells.end(), g.excess_cells.begin(), g.excess_cells.end());
  }
  std::stable_sort(
      out.excess_cells.begin(), out.excess_cells.end(),
      [](const ExcessCell& a, const ExcessCell& b) { return a.excess_ns > b.excess_ns; });
  if (out.excess_cells.size() > kMaxExcessCells) out.excess_cells.resize(kMaxExcessCells);

  const Verdict* chosen = nullptr;
  for (const Verdict& g : groups) {
    if (g.label == VerdictLabel::kHealthy) continue;
    if (chosen == nullptr || Weight(g, schema) > Weight(*chosen, schema)) chosen = &g;
  }
  if (chosen == nullptr) {
    // The groups' evidence totals stay: a step after the groups' (the node shift) judges
    // whether the window carried excess at all.
    for (const Verdict& g : groups) {
      out.total_excess_ns += g.total_excess_ns;
      out.flagged_steps = std::max(out.flagged_steps, g.flagged_steps);
    }
    out.label = VerdictLabel::kHealthy;
    out.explanation = absl::StrCat(
        "Every one of the job's ", groups.size(),
        " sync groups is HEALTHY: each rank was compared with the ranks of the same pipeline stage "
        "and tensor rank only (a pipeline stage slower by design is not a straggler).");
    if (!out.structural.empty()) absl::StrAppend(&out.explanation, " ", out.structural);
    return out;
  }
  out.label = chosen->label;
  out.reason = chosen->reason;
  out.suspects = chosen->suspects;
  out.candidate_ranks = chosen->candidate_ranks;
  out.candidate_stages = chosen->candidate_stages;
  out.total_excess_ns = chosen->total_excess_ns;
  out.flagged_steps = chosen->flagged_steps;
  out.median_margin_ns = chosen->median_margin_ns;
  out.tie_tolerance_ns = chosen->tie_tolerance_ns;
  out.wait_agreement = chosen->wait_agreement;
  out.concurrent_ranks = chosen->concurrent_ranks;
  out.group_wide = chosen->group_wide;
  out.rank_shift_ns = chosen->rank_shift_ns;
  out.rank_z = chosen->rank_z;
  out.settle = chosen->settle;
  out.steps_to_profile = chosen->steps_to_profile;
  out.sync_group = chosen->group;
  std::vector<std::string> others;
  for (const Verdict& g : groups) {
    if (&g != chosen && g.label != VerdictLabel::kHealthy) others.push_back(Brief(g, schema));
  }
  out.explanation = absl::StrCat("Sync group ", chosen->group, ": ", chosen->explanation);
  if (!out.explanation.empty() && out.explanation.back() != '.') out.explanation += '.';
  if (!others.empty()) {
    absl::StrAppend(&out.explanation,
                    " Other groups not healthy (waiting on it through the "
                    "pipeline, or a second fault): ",
                    absl::StrJoin(others, "; "), ".");
  }
  if (!out.structural.empty()) absl::StrAppend(&out.explanation, " ", out.structural);
  return out;
}

void NameTensorGroup(std::span<const std::vector<int32_t>> members,
                     std::span<const int32_t> pipeline_stages, std::span<const Verdict> groups,
                     const StageSchema& schema, Verdict* job) {
  if (job->label == VerdictLabel::kHealthy || members.size() != groups.size()) return;
  const bool staged = pipeline_stages.size() == groups.size();
  int stage = -1;
  std::ptrdiff_t replica = -1;
  int32_t pipeline_stage = -1;
  std::vector<Suspect> leads;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Verdict& v = groups[g];
    if (v.label == VerdictLabel::kHealthy) continue;
    const std::optional<size_t> k = TopStage(v, schema);
    if (!k || schema.stage(*k).kind != StageKind::kTensor) return;
    const auto it = std::find(members[g].begin(), members[g].end(), v.suspects[0].rank);
    if (it == members[g].end()) return;
    const std::ptrdiff_t i = it - members[g].begin();
    const int32_t s = staged ? pipeline_stages[g] : -1;
    if (!leads.empty() && (static_cast<int>(*k) != stage || i != replica || s != pipeline_stage)) {
      return;
    }
    stage = static_cast<int>(*k);
    replica = i;
    pipeline_stage = s;
    leads.push_back(v.suspects[0]);
  }
  if (leads.empty()) return;
  std::vector<int32_t> ranks;  // the tensor group: that replica's member of every peer group
  for (size_t g = 0; g < groups.size(); ++g) {
    const bool peer =
        staged ? pipeline_stages[g] == pipeline_stage : groups[g].label != VerdictLabel::kHealthy;
    if (peer && replica < static_cast<std::ptrdiff_t>(members[g].size())) {
      ranks.push_back(members[g][static_cast<size_t>(replica)]);
    }
  }
  if (ranks.size() < 2) return;
  std::sort(ranks.begin(), ranks.end());
  std::stable_sort(leads.begin(), leads.end(),
                   [](const Suspect& a, const Suspect& b) { return a.excess_ns > b.excess_ns; });
  // The tensor group's cells lead the suspects, then the deciding group's others.
  for (const Suspect& s : job->suspects) {
    if (std::find(ranks.begin(), ranks.end(), s.rank) == ranks.end() || s.stage != stage) {
      leads.push_back(s);
    }
  }
  leads.resize(std::min(leads.size(), std::max(kMaxSuspects, ranks.size())));
  job->suspects = std::move(leads);
  job->label = VerdictLabel::kAmbiguous;
  job->reason = AmbiguityReason::kTie;
  job->group_wide = false;
  job->candidate_ranks = ranks;
  job->candidate_stages = {stage};
  const std::string& name = schema.stage(static_cast<size_t>(stage)).name;
  job->explanation = absl::StrCat(
      "Tensor group: ranks ", FormatRankList(ranks), " (the same replica at ", ranks.size(),
      " tensor positions) are slow together in \"", name,
      "\", a stage whose collectives run over their tensor group: they finish it together, so "
      "stage marks cannot say which of them (or their link) is slow.");
  if (!job->structural.empty()) absl::StrAppend(&job->explanation, " ", job->structural);
  job->settle =
      absl::StrCat("enable the collective probe for stage \"", name,
                   "\" (the last to arrive at its collectives is the slow rank), or "
                   "profile ranks ",
                   FormatRankList(ranks), " at steps ", absl::StrJoin(job->steps_to_profile, ", "));
}

}  // namespace stagefrontier
