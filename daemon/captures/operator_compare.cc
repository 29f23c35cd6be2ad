#include "daemon/captures/operator_compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/accounting/robust_stats.h"

namespace stagefrontier {
namespace {

// Operators whose time is waiting for another rank or for the device.
bool IsWaiting(const std::string& path) {
  const size_t cut = path.rfind(kCallPathSeparator);
  const std::string leaf = absl::AsciiStrToLower(
      cut == std::string::npos ? path : path.substr(cut + std::string(kCallPathSeparator).size()));
  for (const char* word :
       {"allreduce", "all_reduce", "allgather", "all_gather", "reduce_scatter", "broadcast",
        "barrier", "wait", "synchronize", "c10d", "nccl", "gloo", "recv"}) {
    if (absl::StrContains(leaf, word)) return true;
  }
  return false;
}

// The references' median and robust scale of per-step values.
struct Spread {
  double median = 0;
  double scale = 0;
};

Spread SpreadOf(std::vector<int64_t> v, const CompareOptions& o) {
  Spread s;
  if (v.empty()) return s;
  const int64_t m = MedianInPlace(v);
  s.median = static_cast<double>(m);
  const double mad = kMadToSigma * static_cast<double>(MadInPlace(v, m));
  s.scale = std::max({mad, static_cast<double>(o.noise_floor_ns), o.relative_floor * s.median});
  return s;
}

double Mean(const std::vector<int64_t>& v) {
  if (v.empty()) return 0;
  double sum = 0;
  for (int64_t x : v) sum += static_cast<double>(x);
  return sum / static_cast<double>(v.size());
}

// What one call path looks like on the suspect and on the references.
struct PathStats {
  double suspect_ns = 0;
  Spread reference;
  bool outlier = false;
  // Start and end offsets, where the operator ran in most steps on both sides.
  bool timed = false;
  double start_delay_ns = 0;
  double start_z = 0;
  double end_delay_ns = 0;
  double end_z = 0;
  std::string predecessor;  // the suspect's most frequent one
};

}  // namespace

const char* OperatorRoleName(OperatorRole role) {
  switch (role) {
    case OperatorRole::kCulprit:
      return "culprit";
    case OperatorRole::kVictim:
      return "victim";
    case OperatorRole::kDependency:
      return "dependency";
  }
  return "?";
}

absl::StatusOr<OperatorReport> CompareOperators(const OperatorProfile& suspect,
                                                const std::vector<OperatorProfile>& references,
                                                const CompareOptions& options) {
  if (references.empty()) {
    return absl::InvalidArgumentError("no reference rank to compare the suspect with");
  }
  if (suspect.steps.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the suspect rank ", suspect.rank, " has no captured step"));
  }
  OperatorReport out;
  out.stage = suspect.stage;
  out.suspect_rank = suspect.rank;
  out.suspect_steps = static_cast<int32_t>(suspect.steps.size());
  std::vector<int64_t> stage_ref;
  for (const OperatorProfile& r : references) {
    if (r.stage != suspect.stage) {
      return absl::InvalidArgumentError(absl::StrCat("reference rank ", r.rank,
                                                     " profiles stage \"", r.stage,
                                                     "\", the suspect \"", suspect.stage, "\""));
    }
    if (r.steps.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("reference rank ", r.rank, " has no captured step"));
    }
    out.reference_ranks.push_back(r.rank);
    out.reference_steps += static_cast<int32_t>(r.steps.size());
    stage_ref.insert(stage_ref.end(), r.stage_duration_ns.begin(), r.stage_duration_ns.end());
  }
  out.stage_suspect_ns = Mean(suspect.stage_duration_ns);
  out.stage_reference_ns = SpreadOf(stage_ref, options).median;
  const double material = std::max(static_cast<double>(options.min_excess_ns),
                                   options.min_excess_fraction * out.stage_reference_ns);

  std::set<std::string> paths;
  for (const auto& [path, steps] : suspect.operators) paths.insert(path);
  for (const OperatorProfile& r : references) {
    for (const auto& [path, steps] : r.operators) paths.insert(path);
  }
  static const std::vector<OperatorStep> kAbsent;
  auto steps_of = [&](const OperatorProfile& p,
                      const std::string& path) -> const std::vector<OperatorStep>& {
    auto it = p.operators.find(path);
    return it == p.operators.end() ? kAbsent : it->second;
  };
  std::map<std::string, PathStats> stats;
  for (const std::string& path : paths) {
    PathStats& s = stats[path];
    std::vector<int64_t> mine, theirs, my_begin, their_begin, my_end, their_end;
    std::map<std::string, int> predecessors;
    const std::vector<OperatorStep>& own = steps_of(suspect, path);
    for (size_t i = 0; i < suspect.steps.size(); ++i) {
      const OperatorStep* op = own.empty() ? nullptr : &own[i];
      mine.push_back(op ? op->duration_ns : 0);
      if (op && op->occurrences > 0) {
        my_begin.push_back(op->begin_ns);
        my_end.push_back(op->end_ns);
        ++predecessors[op->predecessor];
      }
    }
    for (const OperatorProfile& r : references) {
      const std::vector<OperatorStep>& their_steps = steps_of(r, path);
      for (size_t i = 0; i < r.steps.size(); ++i) {
        const OperatorStep* op = their_steps.empty() ? nullptr : &their_steps[i];
        theirs.push_back(op ? op->duration_ns : 0);
        if (op && op->occurrences > 0) {
          their_begin.push_back(op->begin_ns);
          their_end.push_back(op->end_ns);
        }
      }
    }
    s.suspect_ns = Mean(mine);
    s.reference = SpreadOf(theirs, options);
    const double excess = s.suspect_ns - s.reference.median;
    s.outlier = excess >= material && excess >= options.outlier_scales * s.reference.scale;
    s.timed = 2 * my_begin.size() > mine.size() && 2 * their_begin.size() > theirs.size();
    if (s.timed) {
      const Spread b = SpreadOf(their_begin, options);
      const Spread e = SpreadOf(their_end, options);
      s.start_delay_ns = Mean(my_begin) - b.median;
      s.start_z = s.start_delay_ns / b.scale;
      s.end_delay_ns = Mean(my_end) - e.median;
      s.end_z = s.end_delay_ns / e.scale;
    }
    int best = 0;
    for (const auto& [p, n] : predecessors) {
      if (n > best) {
        best = n;
        s.predecessor = p;
      }
    }
  }
  // path -> the larger of: the largest excess found anywhere under it, and the sum of the
  // excess of its direct outlier children and the gaps directly under it.
  std::map<std::string, double> explained;
  std::map<std::string, double> direct;
  auto late_start = [&](const PathStats& s) {
    return s.timed && s.start_delay_ns >= material && s.start_z >= options.outlier_scales;
  };

  auto parent_of = [](const std::string& path) {
    const size_t cut = path.rfind(kCallPathSeparator);
    return cut == std::string::npos ? std::string() : path.substr(0, cut);
  };
  std::map<std::string, OperatorFinding> findings;
  // Late starts with a normal duration: follow the blame back through the predecessors to an
  // operator that took longer (credited with a late follower) or to a predecessor that ended
  // on time (the gap between them is a dependency finding).
  std::map<std::string, int32_t> followers;
  int32_t without_cause = 0;
  for (const auto& [path, s] : stats) {
    if (s.outlier || !late_start(s)) continue;
    // A child that starts late because its parent did is not a finding of its own.
    const std::string parent = parent_of(path);
    if (!parent.empty() && stats.count(parent) && late_start(stats.at(parent))) continue;
    std::string at = path;
    std::set<std::string> seen;
    std::string cause;
    while (seen.insert(at).second) {
      const PathStats& cur = stats.at(at);
      if (cur.predecessor.empty() || !stats.count(cur.predecessor)) break;  // first under parent
      const PathStats& pred = stats.at(cur.predecessor);
      if (pred.outlier) {
        cause = cur.predecessor;  // blame reaches an operator that took longer
        break;
      }
      if (!(pred.timed && pred.end_delay_ns >= material && pred.end_z >= options.outlier_scales)) {
        // The predecessor ended on time: the time went in the gap before `at`. Between two
        // operators of one traced function, that is the function's own time (what a
        // profiler calls self time): the function is the culprit. Between operators with no
        // traced function around them, the gap is a dependency edge.
        const std::string holder = parent_of(at);
        const bool own = !holder.empty() && holder == parent_of(cur.predecessor);
        const auto leaf = [&](const std::string& p) { return p.substr(holder.size() + 3); };
        cause = own ? absl::StrCat(holder, " (own time between ", leaf(cur.predecessor), " and ",
                                   leaf(at), ")")
                    : absl::StrCat("gap: ", cur.predecessor, " -> ", at);
        if (!findings.count(cause)) {
          OperatorFinding f;
          f.path = cause;
          f.role = own ? OperatorRole::kCulprit : OperatorRole::kDependency;
          f.own_time = own;
          f.excess_ns = cur.start_delay_ns - std::max(0.0, pred.end_delay_ns);
          f.start_delay_ns = cur.start_delay_ns;
          f.z = cur.start_z;
          findings[cause] = f;
          // Where the gap lies: under the same parent as `at`.
          if (const std::string p = parent_of(at); !p.empty()) direct[p] += f.excess_ns;
          for (std::string p = parent_of(at); !p.empty(); p = parent_of(p)) {
            explained[p] = std::max(explained[p], f.excess_ns);
          }
        }
        break;
      }
      at = cur.predecessor;
    }
    if (cause.empty()) {
      ++without_cause;
    } else {
      ++followers[cause];
    }
  }
  if (without_cause > 0) {
    out.notes.push_back(absl::StrCat(without_cause,
                                     " operators started late with no operator before them to "
                                     "blame (the stage began late, or work outside the trace)"));
  }
  // Duration outliers. A parent is an outlier by inclusion when a child or a gap under it is:
  // the most specific ones are named, a parent whose excess one of them, or its outlier
  // children and gaps together, explain (80% or more) is left out.
  for (const auto& [path, s] : stats) {
    if (!s.outlier) continue;
    const double excess = s.suspect_ns - s.reference.median;
    if (const std::string p = parent_of(path); !p.empty()) direct[p] += excess;
    for (std::string p = parent_of(path); !p.empty(); p = parent_of(p)) {
      explained[p] = std::max(explained[p], excess);
    }
  }
  for (const auto& [p, sum] : direct) explained[p] = std::max(explained[p], sum);
  for (const auto& [path, s] : stats) {
    if (!s.outlier) continue;
    const double excess = s.suspect_ns - s.reference.median;
    if (explained.count(path) && explained.at(path) >= 0.8 * excess) continue;
    OperatorFinding f;
    f.path = path;
    f.role = IsWaiting(path) ? OperatorRole::kVictim : OperatorRole::kCulprit;
    f.suspect_ns = s.suspect_ns;
    f.reference_ns = s.reference.median;
    f.excess_ns = excess;
    f.z = excess / s.reference.scale;
    f.start_delay_ns = s.start_delay_ns;
    findings[path] = f;
  }
  for (const auto& [cause, n] : followers) {
    if (findings.count(cause)) findings.at(cause).late_followers += n;
  }
  std::vector<OperatorFinding> all;
  for (auto& [path, f] : findings) {
    if (f.excess_ns >= material) all.push_back(std::move(f));
  }
  std::sort(all.begin(), all.end(), [](const OperatorFinding& a, const OperatorFinding& b) {
    return a.excess_ns != b.excess_ns ? a.excess_ns > b.excess_ns : a.path < b.path;
  });
  if (all.size() > options.top) {
    out.notes.push_back(absl::StrCat(all.size() - options.top, " smaller findings left out"));
    all.resize(options.top);
  }
  for (const OperatorFinding& f : all) out.explained_ns += f.excess_ns;
  out.findings = std::move(all);
  if (out.findings.empty()) {
    out.notes.push_back(absl::StrCat("no operator of stage \"", out.stage, "\" differs beyond ",
                                     options.outlier_scales, " robust scales and ", material / 1e6,
                                     " ms per step: the stage is ",
                                     (out.stage_suspect_ns - out.stage_reference_ns) / 1e6,
                                     " ms per step longer on the suspect"));
  }
  return out;
}

}  // namespace stagefrontier
