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

namespace {

std::string ParentOf(const std::string& path) {
  const size_t cut = path.rfind(kCallPathSeparator);
  return cut == std::string::npos ? std::string() : path.substr(0, cut);
}

const std::vector<OperatorStep>& StepsOf(const OperatorProfile& p, const std::string& path) {
  static const std::vector<OperatorStep> kAbsent;
  auto it = p.operators.find(path);
  return it == p.operators.end() ? kAbsent : it->second;
}

// Checks the inputs and fills the report's header: ranks, steps and the stage's length.
absl::StatusOr<OperatorReport> ReportHeader(const OperatorProfile& suspect,
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
  return out;
}

// One side's per-step samples of one call path: durations (0 where it did not run) and,
// where it ran, its start and end offsets.
struct PathSamples {
  std::vector<int64_t> duration, begin, end;
  std::map<std::string, int> predecessors;

  void Add(const OperatorProfile& p, const std::string& path) {
    const std::vector<OperatorStep>& steps = StepsOf(p, path);
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const OperatorStep* op = steps.empty() ? nullptr : &steps[i];
      duration.push_back(op ? op->duration_ns : 0);
      if (op && op->occurrences > 0) {
        begin.push_back(op->begin_ns);
        end.push_back(op->end_ns);
        ++predecessors[op->predecessor];
      }
    }
  }
};

PathStats StatsOfPath(const std::string& path, const OperatorProfile& suspect,
                      const std::vector<OperatorProfile>& references, const CompareOptions& options,
                      double material) {
  PathSamples mine, theirs;
  mine.Add(suspect, path);
  for (const OperatorProfile& r : references) theirs.Add(r, path);
  PathStats s;
  s.suspect_ns = Mean(mine.duration);
  s.reference = SpreadOf(theirs.duration, options);
  const double excess = s.suspect_ns - s.reference.median;
  s.outlier = excess >= material && excess >= options.outlier_scales * s.reference.scale;
  s.timed = 2 * mine.begin.size() > mine.duration.size() &&
            2 * theirs.begin.size() > theirs.duration.size();
  if (s.timed) {
    const Spread b = SpreadOf(theirs.begin, options);
    const Spread e = SpreadOf(theirs.end, options);
    s.start_delay_ns = Mean(mine.begin) - b.median;
    s.start_z = s.start_delay_ns / b.scale;
    s.end_delay_ns = Mean(mine.end) - e.median;
    s.end_z = s.end_delay_ns / e.scale;
  }
  int best = 0;
  for (const auto& [p, n] : mine.predecessors) {
    if (n > best) {
      best = n;
      s.predecessor = p;
    }
  }
  return s;
}

// Every call path the suspect or a reference profiled, with its statistics.
std::map<std::string, PathStats> StatsByPath(const OperatorProfile& suspect,
                                             const std::vector<OperatorProfile>& references,
                                             const CompareOptions& options, double material) {
  std::set<std::string> paths;
  for (const auto& [path, steps] : suspect.operators) paths.insert(path);
  for (const OperatorProfile& r : references) {
    for (const auto& [path, steps] : r.operators) paths.insert(path);
  }
  std::map<std::string, PathStats> stats;
  for (const std::string& path : paths) {
    stats[path] = StatsOfPath(path, suspect, references, options, material);
  }
  return stats;
}

// Turns per-path statistics into findings: first late starts, traced back to their cause,
// then duration outliers that no more specific finding explains.
class FindingCollector {
 public:
  FindingCollector(const std::map<std::string, PathStats>& stats, const CompareOptions& options,
                   double material)
      : stats_(stats), options_(options), material_(material) {}

  // Late starts: follow the blame back through the predecessors to an operator that took
  // longer (credited with a late follower) or to a predecessor that ended on time (the gap
  // between them is a finding). An operator that is itself slower may also start late: its
  // longer duration does not explain the time before it, so its start is traced too.
  void TraceLateStarts() {
    for (const auto& [path, s] : stats_) {
      if (!LateStart(s)) continue;
      // A child that starts late because its parent did is not a finding of its own; one that
      // starts materially later still than its parent is (the time went inside the parent).
      const std::string parent = ParentOf(path);
      const auto up = stats_.find(parent);
      if (up != stats_.end() && LateStart(up->second) &&
          s.start_delay_ns - up->second.start_delay_ns < material_) {
        continue;
      }
      const std::string cause = CauseOf(path);
      if (cause.empty()) {
        ++without_cause_;
      } else {
        ++followers_[cause];
      }
    }
  }

  // Duration outliers. A parent is an outlier by inclusion when a child or a gap under it is:
  // the most specific ones are named, a parent whose excess one of them, or its outlier
  // children and gaps together, explain (80% or more) is left out.
  void AddDurationOutliers() {
    for (const auto& [path, s] : stats_) {
      if (s.outlier) Explain(path, s.suspect_ns - s.reference.median);
    }
    for (const auto& [p, sum] : direct_) explained_[p] = std::max(explained_[p], sum);
    for (const auto& [path, s] : stats_) {
      if (!s.outlier) continue;
      const double excess = s.suspect_ns - s.reference.median;
      if (explained_.count(path) && explained_.at(path) >= 0.8 * excess) continue;
      OperatorFinding f;
      f.path = path;
      f.role = IsWaiting(path) ? OperatorRole::kVictim : OperatorRole::kCulprit;
      f.suspect_ns = s.suspect_ns;
      f.reference_ns = s.reference.median;
      f.excess_ns = excess;
      f.z = excess / s.reference.scale;
      f.start_delay_ns = s.start_delay_ns;
      f.within = path;
      findings_[path] = f;
    }
  }

  // The material findings, late followers credited, largest excess first.
  std::vector<OperatorFinding> TakeMaterial() {
    for (const auto& [cause, n] : followers_) {
      if (findings_.count(cause)) findings_.at(cause).late_followers += n;
    }
    std::vector<OperatorFinding> all;
    for (auto& [path, f] : findings_) {
      if (f.excess_ns >= material_) all.push_back(std::move(f));
    }
    std::sort(all.begin(), all.end(), [](const OperatorFinding& a, const OperatorFinding& b) {
      return a.excess_ns != b.excess_ns ? a.excess_ns > b.excess_ns : a.path < b.path;
    });
    return all;
  }

  int32_t without_cause() const { return without_cause_; }

 private:
  bool LateStart(const PathStats& s) const {
    return s.timed && s.start_delay_ns >= material_ && s.start_z >= options_.outlier_scales;
  }
  bool EndedLate(const PathStats& s) const {
    return s.timed && s.end_delay_ns >= material_ && s.end_z >= options_.outlier_scales;
  }

  // The finding a late start at `path` is blamed on; empty when the blame finds none.
  std::string CauseOf(const std::string& path) {
    std::string at = path;
    std::set<std::string> seen;
    while (seen.insert(at).second) {
      const PathStats& cur = stats_.at(at);
      if (cur.predecessor.empty() || !stats_.count(cur.predecessor)) break;  // first under parent
      const PathStats& pred = stats_.at(cur.predecessor);
      if (pred.outlier) return cur.predecessor;  // blame reaches an operator that took longer
      // The gap is the cause when the predecessor ended on time, or ended late by less than
      // the gap holds (a parent that began a little late shifts its first children too).
      const double gap = cur.start_delay_ns - std::max(0.0, pred.end_delay_ns);
      if (!EndedLate(pred) || (gap >= material_ && gap > pred.end_delay_ns)) {
        return AddGap(at, cur, gap);
      }
      at = cur.predecessor;
    }
    return std::string();
  }

  // The time went in the gap before `at` (`gap`: how much later than the references it started
  // after its predecessor's end). Between two operators of one traced function, that is the
  // function's own time (what a profiler calls self time): the function is the culprit. Between
  // operators with no traced function around them, the gap is a dependency edge.
  std::string AddGap(const std::string& at, const PathStats& cur, double gap) {
    const std::string holder = ParentOf(at);
    const bool own = !holder.empty() && holder == ParentOf(cur.predecessor);
    const auto leaf = [&](const std::string& p) { return p.substr(holder.size() + 3); };
    const std::string cause = own ? absl::StrCat(holder, " (own time between ",
                                                 leaf(cur.predecessor), " and ", leaf(at), ")")
                                  : absl::StrCat("gap: ", cur.predecessor, " -> ", at);
    if (!findings_.count(cause)) {
      OperatorFinding f;
      f.path = cause;
      f.role = own ? OperatorRole::kCulprit : OperatorRole::kDependency;
      f.own_time = own;
      f.excess_ns = gap;
      f.start_delay_ns = cur.start_delay_ns;
      f.z = cur.start_z;
      f.within = holder;
      findings_[cause] = f;
      // Where the gap lies: under the same parent as `at`.
      Explain(at, f.excess_ns);
    }
    return cause;
  }

  // Records `excess` found at `path` (or in a gap just before it) for its ancestors.
  void Explain(const std::string& path, double excess) {
    if (const std::string p = ParentOf(path); !p.empty()) direct_[p] += excess;
    for (std::string p = ParentOf(path); !p.empty(); p = ParentOf(p)) {
      explained_[p] = std::max(explained_[p], excess);
    }
  }

  const std::map<std::string, PathStats>& stats_;
  const CompareOptions& options_;
  const double material_;
  std::map<std::string, OperatorFinding> findings_;
  // path -> the larger of: the largest excess found anywhere under it, and the sum of the
  // excess of its direct outlier children and the gaps directly under it.
  std::map<std::string, double> explained_;
  std::map<std::string, double> direct_;
  std::map<std::string, int32_t> followers_;
  int32_t without_cause_ = 0;
};

// Whether `f` lies in the time of the operator finding `holder` (a descendant, or a gap under
// it): its excess is part of the holder's.
bool LiesWithin(const OperatorFinding& f, const OperatorFinding& holder) {
  if (&f == &holder || holder.role == OperatorRole::kDependency || holder.own_time) return false;
  return f.within == holder.path ||
         absl::StartsWith(f.within, absl::StrCat(holder.path, kCallPathSeparator));
}

// Sums the findings' excess counting each span of time once: nested findings overlap.
void SumExplained(OperatorReport* r) {
  for (const OperatorFinding& f : r->findings) {
    const bool nested = std::any_of(r->findings.begin(), r->findings.end(),
                                    [&](const OperatorFinding& h) { return LiesWithin(f, h); });
    if (nested) {
      ++r->nested_findings;
    } else {
      r->explained_ns += f.excess_ns;
    }
  }
}

}  // namespace

absl::StatusOr<OperatorReport> CompareOperators(const OperatorProfile& suspect,
                                                const std::vector<OperatorProfile>& references,
                                                const CompareOptions& options) {
  absl::StatusOr<OperatorReport> header = ReportHeader(suspect, references, options);
  if (!header.ok()) return header.status();
  OperatorReport out = *std::move(header);
  const double material = std::max(static_cast<double>(options.min_excess_ns),
                                   options.min_excess_fraction * out.stage_reference_ns);
  const std::map<std::string, PathStats> stats =
      StatsByPath(suspect, references, options, material);
  FindingCollector collector(stats, options, material);
  collector.TraceLateStarts();
  if (collector.without_cause() > 0) {
    out.notes.push_back(absl::StrCat(collector.without_cause(),
                                     " operators started late with no operator before them to "
                                     "blame (the stage began late, or work outside the trace)"));
  }
  collector.AddDurationOutliers();
  std::vector<OperatorFinding> all = collector.TakeMaterial();
  if (all.size() > options.top) {
    out.notes.push_back(absl::StrCat(all.size() - options.top, " smaller findings left out"));
    all.resize(options.top);
  }
  out.findings = std::move(all);
  SumExplained(&out);
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
