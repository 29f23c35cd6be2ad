#include "daemon/nodes/node_shift.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/accounting/rank_evidence.h"
#include "daemon/accounting/robust_stats.h"

namespace stagefrontier {

namespace {

int32_t GroupOf(const RankPlacement& p, size_t r) {
  return p.group_of_rank.empty() ? 0 : p.group_of_rank[r];
}

// Median of v (the mean of the two middle values when even); v is reordered.
double MedianOf(std::vector<double>* v) {
  const size_t n = v->size();
  const auto mid = v->begin() + static_cast<std::ptrdiff_t>(n / 2);
  std::nth_element(v->begin(), mid, v->end());
  if (n % 2 == 1) return *mid;
  return (*mid + *std::max_element(v->begin(), mid)) / 2;
}

// A running mean and its standard error.
struct Moments {
  double sum = 0;
  double sum_sq = 0;
  int32_t n = 0;
  void Add(double x) {
    sum += x;
    sum_sq += x * x;
    ++n;
  }
  double Mean() const { return n > 0 ? sum / n : 0; }
  // Standard errors; the spread is floored at 1 us so exact synthetic steps stay finite.
  double Z() const {
    if (n < 2) return 0;
    const double mean = Mean();
    const double var = std::max(0.0, (sum_sq - n * mean * mean) / (n - 1));
    return mean / (std::max(std::sqrt(var), 1000.0) / std::sqrt(static_cast<double>(n)));
  }
};

constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();

// One step's stage-k durations by rank. A complete step whose records are in rank order (the
// aligner's) is read in place, touching only the ranks asked for; any other is spread into
// `scratch` (world entries, -1 absent) and cleared again when done.
class StepDurations {
 public:
  StepDurations(const StepInput& s, size_t world, size_t k, std::vector<int64_t>* scratch)
      : s_(s), k_(k), scratch_(scratch) {
    in_order_ = s.ranks.size() == world;
    for (size_t i = 0; in_order_ && i < world; i += std::max<size_t>(1, world / 16)) {
      in_order_ = s.ranks[i].rank == static_cast<int32_t>(i);
    }
    if (!in_order_) Spread();
  }
  ~StepDurations() {
    if (in_order_) return;
    for (const RankStep& rs : s_.ranks) {
      if (rs.rank >= 0 && static_cast<size_t>(rs.rank) < scratch_->size()) {
        (*scratch_)[rs.rank] = -1;
      }
    }
  }
  StepDurations(const StepDurations&) = delete;
  StepDurations& operator=(const StepDurations&) = delete;

  // -1 when the rank is absent or its record is short.
  int64_t Of(int32_t r) {
    if (in_order_) {
      const RankStep& rs = s_.ranks[r];
      if (rs.rank == r) return Duration(rs);
      in_order_ = false;  // sampled as in order, yet not: spread it after all
      Spread();
    }
    return (*scratch_)[r];
  }

 private:
  int64_t Duration(const RankStep& rs) const {
    return rs.boundaries_ns.size() < k_ + 2 ? -1 : rs.boundaries_ns[k_ + 1] - rs.boundaries_ns[k_];
  }
  void Spread() {
    for (const RankStep& rs : s_.ranks) {
      if (rs.rank >= 0 && static_cast<size_t>(rs.rank) < scratch_->size()) {
        (*scratch_)[rs.rank] = Duration(rs);
      }
    }
  }

  const StepInput& s_;
  size_t k_;
  std::vector<int64_t>* scratch_;
  bool in_order_ = false;
};

// The recurring test (rank_evidence.h's, for a node): steps where the node's deviation is
// beyond kOutlierScales robust noise scales above zero (or its median, if higher), against
// those as far below; and in those steps, the least of its ranks' mean deviations.
void MeasureRecurrences(const std::vector<double>& node_devs,
                        const std::vector<std::vector<double>>& step_rank_devs, NodeShift* out) {
  std::vector<double> sorted = node_devs;
  const double median = MedianOf(&sorted);
  for (double& d : sorted) d = std::abs(d - median);
  const double scale = std::max(kMadToSigma * MedianOf(&sorted), kMinOutlierScaleNs);
  const double above = std::max(median, 0.0) + kOutlierScales * scale;
  const double below = std::min(median, 0.0) - kOutlierScales * scale;
  const size_t ranks = step_rank_devs.empty() ? 0 : step_rank_devs[0].size();
  std::vector<Moments> rank_in_outliers(ranks);
  std::vector<Moments> rank_elsewhere(ranks);
  Moments node_in_outliers;
  for (size_t t = 0; t < node_devs.size(); ++t) {
    if (node_devs[t] < below) ++out->opposite_steps;
    const bool outlier = node_devs[t] > above;
    if (outlier) node_in_outliers.Add(node_devs[t]);
    for (size_t i = 0; i < ranks; ++i) {
      if (std::isnan(step_rank_devs[t][i])) continue;
      (outlier ? rank_in_outliers : rank_elsewhere)[i].Add(step_rank_devs[t][i]);
    }
  }
  for (const Moments& m : rank_elsewhere) {
    if (m.n > 0) out->max_rank_other_mean_ns = std::max(out->max_rank_other_mean_ns, m.Mean());
  }
  out->outlier_steps = node_in_outliers.n;
  if (out->outlier_steps == 0) return;
  out->outlier_z = (out->outlier_steps - out->opposite_steps) /
                   std::sqrt(static_cast<double>(out->outlier_steps + out->opposite_steps));
  out->outlier_mean_ns = node_in_outliers.Mean();
  out->min_rank_outlier_mean_ns = out->outlier_mean_ns;
  for (const Moments& m : rank_in_outliers) {
    out->min_rank_outlier_mean_ns = std::min(out->min_rank_outlier_mean_ns, m.Mean());
  }
}

}  // namespace

std::vector<std::string> NodesToCompare(const RankPlacement& p) {
  std::unordered_map<int32_t, int32_t> known_in_group;
  std::map<std::pair<std::string, int32_t>, int32_t> on_node_in_group;
  for (size_t r = 0; r < p.rank_nodes.size(); ++r) {
    if (p.rank_nodes[r].empty()) continue;
    ++known_in_group[GroupOf(p, r)];
    ++on_node_in_group[{p.rank_nodes[r], GroupOf(p, r)}];
  }
  std::map<std::string, int32_t> with_peers;  // ranks that have peers on other nodes
  std::map<std::string, bool> large;          // holds an eighth of a group
  for (const auto& [key, count] : on_node_in_group) {
    const int32_t group_size = known_in_group[key.second];
    if (count >= group_size) continue;
    with_peers[key.first] += count;
    if (8 * count >= group_size) large[key.first] = true;
  }
  std::vector<std::string> out;
  for (const auto& [node, count] : with_peers) {
    if (count >= 2 && large[node]) out.push_back(node);
  }
  return out;
}

NodeShift MeasureNodeShift(const std::vector<const StepInput*>& steps, const StageSchema& schema,
                           const RankPlacement& p, const std::string& node, int32_t stage) {
  NodeShift out;
  out.node = node;
  out.stage = stage;
  const size_t world = p.rank_nodes.size();
  if (stage < 0 || static_cast<size_t>(stage) >= schema.size()) return out;
  // The node's ranks, and the peers each of its groups offers on other nodes.
  std::map<int32_t, std::vector<int32_t>> peers;
  std::vector<int32_t> mine;
  for (size_t r = 0; r < world; ++r) {
    if (p.rank_nodes[r] == node) mine.push_back(static_cast<int32_t>(r));
  }
  for (int32_t r : mine) peers.emplace(GroupOf(p, r), std::vector<int32_t>{});
  for (size_t r = 0; r < world; ++r) {
    if (p.rank_nodes[r].empty() || p.rank_nodes[r] == node) continue;
    auto it = peers.find(GroupOf(p, r));
    if (it != peers.end()) it->second.push_back(static_cast<int32_t>(r));
  }
  mine.erase(std::remove_if(mine.begin(), mine.end(),
                            [&](int32_t r) { return peers[GroupOf(p, r)].empty(); }),
             mine.end());
  out.ranks = mine;
  if (mine.size() < 2) return out;

  std::vector<int64_t> duration(world, -1);  // this step's; -1 absent
  std::vector<Moments> rank_moments(mine.size());
  Moments node_moments;
  std::map<int32_t, double> group_median;
  std::vector<double> values;
  std::vector<double> devs;
  std::vector<double> node_devs;                    // per step compared
  std::vector<std::vector<double>> step_rank_devs;  // per step compared, per rank of `mine`
  const size_t k = static_cast<size_t>(stage);
  for (const StepInput* s : steps) {
    StepDurations step(*s, world, k, &duration);
    group_median.clear();
    for (const auto& [group, ranks] : peers) {
      values.clear();
      for (int32_t r : ranks) {
        if (const int64_t d = step.Of(r); d >= 0) values.push_back(static_cast<double>(d));
      }
      if (!values.empty()) group_median[group] = MedianOf(&values);
    }
    devs.clear();
    std::vector<double> rank_devs(mine.size(), kAbsent);
    for (size_t i = 0; i < mine.size(); ++i) {
      const int32_t r = mine[i];
      auto it = group_median.find(GroupOf(p, r));
      const int64_t d = step.Of(r);
      if (d < 0 || it == group_median.end()) continue;
      rank_devs[i] = static_cast<double>(d) - it->second;
      rank_moments[i].Add(rank_devs[i]);
      devs.push_back(rank_devs[i]);
    }
    if (!devs.empty()) {
      node_devs.push_back(MedianOf(&devs));
      node_moments.Add(node_devs.back());
      step_rank_devs.push_back(std::move(rank_devs));
    }
  }
  out.steps = node_moments.n;
  if (out.steps < kMinNodeShiftSteps) {
    out.steps = 0;
    return out;
  }
  out.shift_ns = node_moments.Mean();
  out.z = node_moments.Z();
  out.min_rank_shift_ns = rank_moments[0].Mean();
  out.min_rank_z = rank_moments[0].Z();
  for (const Moments& m : rank_moments) {
    out.min_rank_shift_ns = std::min(out.min_rank_shift_ns, m.n > 0 ? m.Mean() : 0.0);
    out.min_rank_z = std::min(out.min_rank_z, m.Z());
  }
  MeasureRecurrences(node_devs, step_rank_devs, &out);
  return out;
}

namespace {

// The verdict's cell excess per stage.
std::vector<int64_t> StageExcess(const StageSchema& schema, const Verdict& v) {
  std::vector<int64_t> by_stage(schema.size(), 0);
  for (const ExcessCell& c : v.excess_cells) {
    if (c.stage >= 0 && static_cast<size_t>(c.stage) < schema.size()) {
      by_stage[c.stage] += c.excess_ns;
    }
  }
  return by_stage;
}

// Up to `limit` of `nodes`, those whose ranks' mean duration in stage k over the window most
// exceeds their group's other ranks' (a crude O(rank-steps) pass: the exact per-step
// comparison costs a median per group and step, too much for thousands of nodes).
std::vector<std::string> LikeliestNodes(const std::vector<const StepInput*>& steps,
                                        const RankPlacement& p,
                                        const std::vector<std::string>& nodes, size_t k,
                                        size_t limit) {
  if (nodes.size() <= limit) return nodes;
  const size_t world = p.rank_nodes.size();
  std::vector<Moments> per_rank(world);
  for (const StepInput* s : steps) {
    for (const RankStep& rs : s->ranks) {
      if (rs.rank >= 0 && static_cast<size_t>(rs.rank) < world &&
          rs.boundaries_ns.size() >= k + 2) {
        per_rank[rs.rank].Add(static_cast<double>(rs.boundaries_ns[k + 1] - rs.boundaries_ns[k]));
      }
    }
  }
  // Per group, and per (node, group): the sum and count of the ranks' means.
  std::map<int32_t, std::pair<double, int32_t>> group_sum;
  std::map<std::pair<std::string, int32_t>, std::pair<double, int32_t>> node_sum;
  for (size_t r = 0; r < world; ++r) {
    if (p.rank_nodes[r].empty() || per_rank[r].n == 0) continue;
    const double m = per_rank[r].Mean();
    auto& g = group_sum[GroupOf(p, r)];
    g.first += m;
    ++g.second;
    auto& n = node_sum[{p.rank_nodes[r], GroupOf(p, r)}];
    n.first += m;
    ++n.second;
  }
  std::map<std::string, std::pair<double, int32_t>> shift;  // node -> (sum of gaps, ranks)
  for (const auto& [key, own] : node_sum) {
    const auto& g = group_sum[key.second];
    if (g.second <= own.second) continue;
    const double peers = (g.first - own.first) / (g.second - own.second);
    auto& x = shift[key.first];
    x.first += own.first - own.second * peers;
    x.second += own.second;
  }
  std::vector<std::pair<double, std::string>> ranked;
  for (const std::string& node : nodes) {
    auto it = shift.find(node);
    if (it != shift.end() && it->second.second > 0 && it->second.first > 0) {
      ranked.emplace_back(it->second.first / it->second.second, node);
    }
  }
  std::sort(ranked.begin(), ranked.end(), std::greater<>());
  std::vector<std::string> out;
  for (size_t i = 0; i < ranked.size() && i < limit; ++i) out.push_back(ranked[i].second);
  return out;
}

// A persistent shift, or a recurring one; either way every rank of the node takes part.
bool Persistent(const NodeShift& s, const NodeShiftThresholds& th, double step_ns) {
  return s.steps > 0 && s.shift_ns >= th.material_fraction * step_ns && s.z >= th.z_strong &&
         s.min_rank_z >= th.z_support && 2 * s.min_rank_shift_ns >= s.shift_ns;
}

bool Recurring(const NodeShift& s, const NodeShiftThresholds& th, double step_ns) {
  return s.steps > 0 && s.outlier_steps >= kMinOutlierSteps && s.outlier_z >= th.z_support &&
         s.outlier_mean_ns >= th.material_fraction * step_ns &&
         2 * s.min_rank_outlier_mean_ns >= s.outlier_mean_ns &&
         2 * s.max_rank_other_mean_ns < s.outlier_mean_ns;
}

void RewriteForNode(const StageSchema& schema, const NodeShift& s, int64_t stage_excess_ns,
                    Verdict* v) {
  // The frontier charged the stage's excess to whoever it found at the boundaries (often the
  // ranks that waited for the node): the node's ranks share it evenly, as a tie's do.
  const int64_t each = stage_excess_ns / static_cast<int64_t>(s.ranks.size());
  std::vector<Suspect> suspects;
  for (int32_t r : s.ranks) {
    Suspect x{
        .stage = s.stage,
        .rank = r,
        .excess_ns = each,
        .share = v->total_excess_ns > 0 ? static_cast<double>(each) / v->total_excess_ns : 0.0,
        .flagged_steps = 0,
        .what_if_saving_ns = 0};
    for (const ExcessCell& c : v->excess_cells) {
      if (c.stage == x.stage && c.rank == x.rank) x.flagged_steps = c.flagged_steps;
    }
    for (const Suspect& old : v->suspects) {
      if (old.stage == x.stage && old.rank == x.rank) x.what_if_saving_ns = old.what_if_saving_ns;
    }
    if (suspects.size() < 5) suspects.push_back(x);
  }
  v->suspects = std::move(suspects);
  v->node = s.node;
  v->label = VerdictLabel::kClear;
  v->reason = AmbiguityReason::kNone;
  v->group_wide = false;
  v->candidate_ranks = s.ranks;
  v->candidate_stages = {s.stage};
  v->concurrent_ranks.clear();
  v->settle.clear();
  v->rank_shift_ns = static_cast<int64_t>(s.shift_ns);
  v->rank_z = s.z;
  const std::string head = absl::StrFormat(
      "node %s: all %d of its ranks slow in %s (the node's fault, not one rank's)", s.node,
      static_cast<int>(s.ranks.size()), schema.stage(static_cast<size_t>(s.stage)).name);
  const std::string how =
      s.recurring ? absl::StrFormat(
                        "in %d of %d steps, %.2f ms longer each time than the ranks of "
                        "their sync group on other nodes (%d steps the other way; the least "
                        "of its ranks %.2f ms)",
                        s.outlier_steps, s.steps, s.outlier_mean_ns / 1e6, s.opposite_steps,
                        s.min_rank_outlier_mean_ns / 1e6)
                  : absl::StrFormat(
                        "%.2f ms per step longer than the ranks of their sync group on "
                        "other nodes (%.1f standard errors; the least of its ranks %.2f ms)",
                        s.shift_ns / 1e6, s.z, s.min_rank_shift_ns / 1e6);
  v->explanation = absl::StrFormat("%s: %s; the window's excess: %.2f ms over %d steps", head, how,
                                   static_cast<double>(v->total_excess_ns) / 1e6, v->flagged_steps);
}

}  // namespace

void NameSlowNode(const StageSchema& schema, const RankPlacement& placement,
                  const std::vector<const StepInput*>& steps, const NodeShiftThresholds& th,
                  Verdict* v) {
  if (!v->node.empty() || v->steps <= 0 || v->flagged_steps < th.min_flagged_steps ||
      static_cast<double>(v->total_excess_ns) <
          th.healthy_fraction * static_cast<double>(v->exposed_ns)) {
    return;
  }
  if (!placement.group_of_rank.empty() &&
      placement.group_of_rank.size() != placement.rank_nodes.size()) {
    return;
  }
  const std::vector<std::string> nodes = NodesToCompare(placement);
  if (nodes.empty()) return;
  const std::vector<int64_t> by_stage = StageExcess(schema, *v);
  bool work_charged = false;
  for (size_t k = 0; k < schema.size(); ++k) {
    work_charged = work_charged || (schema.IsWork(k) && by_stage[k] > 0);
  }
  if (!work_charged) return;
  // Every work stage (io, compute, tensor: StageSchema::IsWork) is measured: the frontier's cells
  // may be the waiters' (the stage ends when the node's ranks arrive) and in another stage than the
  // node's work. The largest qualifying shift is named.
  const double step_ns = static_cast<double>(v->exposed_ns) / v->steps;
  NodeShift best;
  for (size_t k = 0; k < schema.size(); ++k) {
    if (!schema.IsWork(k)) continue;
    for (const std::string& node : LikeliestNodes(steps, placement, nodes, k, kMaxNodesMeasured)) {
      NodeShift s = MeasureNodeShift(steps, schema, placement, node, static_cast<int32_t>(k));
      s.recurring = !Persistent(s, th, step_ns);
      if ((!s.recurring || Recurring(s, th, step_ns)) &&
          (best.steps == 0 || s.shift_ns > best.shift_ns)) {
        best = std::move(s);
      }
    }
  }
  if (best.steps > 0) RewriteForNode(schema, best, by_stage[best.stage], v);
}

}  // namespace stagefrontier
