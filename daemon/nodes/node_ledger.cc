#include "daemon/nodes/node_ledger.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/accounting/verdict.h"
#include "daemon/common/utf8_prefix.h"
#include "daemon/nodes/node_window.h"

namespace stagefrontier {
namespace {

// Moves `job` to the back of `recent` (adding it, dropping the oldest past `keep`); returns
// true when it was not there.
bool Touch(std::vector<std::string>* recent, const std::string& job, size_t keep) {
  auto it = std::find(recent->begin(), recent->end(), job);
  const bool fresh = it == recent->end();
  if (!fresh) recent->erase(it);
  recent->push_back(job);
  if (recent->size() > keep) recent->erase(recent->begin());
  return fresh;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NodeLedger>> NodeLedger::Open(const NodeLedgerOptions& options,
                                                             JournalOpenInfo* info) {
  if (absl::Status s = options.classes.Validate(); !s.ok()) return s;
  std::unique_ptr<NodeLedger> ledger(new NodeLedger(options));
  NodeLedger* l = ledger.get();
  absl::StatusOr<std::unique_ptr<RecordLog>> opened = RecordLog::OpenOrCreate(
      options.path, options.fsync,
      [l](const v1::JournalRecord& r) {
        if (r.body_case() == v1::JournalRecord::kNodeHost) {
          l->ApplyHostLocked(r.node_host());
          return absl::OkStatus();
        }
        if (r.body_case() == v1::JournalRecord::kNodeHang) {
          l->ApplyHangLocked(r.node_hang());
          return absl::OkStatus();
        }
        if (r.body_case() != v1::JournalRecord::kNodeWindow) {
          ++l->counters_.replay_skipped;
          return absl::OkStatus();
        }
        std::vector<Change> ignored;  // replay restores classes; it does not announce them
        l->ApplyLocked(r.node_window(), &ignored);
        return absl::OkStatus();
      },
      info);
  if (!opened.ok()) return opened.status();
  ledger->file_ = std::move(*opened);
  return ledger;
}

NodeLedger::NodeState* NodeLedger::NodeLocked(const std::string& node) {
  auto it = nodes_.find(node);
  if (it != nodes_.end()) return &it->second;
  if (nodes_.size() >= options_.max_nodes) {
    ++counters_.nodes_refused;
    return nullptr;
  }
  return &nodes_[node];
}

bool NodeLedger::ApplyLocked(const v1::NodeWindow& w, std::vector<Change>* changes) {
  JobNodes& job = jobs_[w.job()];
  if (w.first_step() <= job.last_first_step) {
    ++counters_.duplicate_windows;
    return false;
  }
  job.last_first_step = w.first_step();
  if (w.nodes_changed()) job.nodes.assign(w.nodes().begin(), w.nodes().end());
  ++counters_.windows;

  // Charges per node, then one observation per node the window saw: charged when its share
  // of the window's excess reaches the class test's charge_share.
  std::map<std::string, double> seen;  // node -> share
  for (const std::string& n : job.nodes) seen.emplace(n, 0.0);
  for (const v1::NodeCharge& c : w.charges()) {
    if (c.node().empty()) {
      ++counters_.unattributed;
      continue;
    }
    NodeState* s = NodeLocked(c.node());
    if (s == nullptr) continue;
    const double gpu_s = WastedGpuSeconds(c.excess_ns(), c.waiting_ranks());
    s->gpu_seconds += gpu_s;
    NodeStageCost& sc = s->stages[c.stage()];
    sc.stage = c.stage();
    sc.gpu_seconds += gpu_s;
    ++sc.windows;
    seen[c.node()] += std::isfinite(c.share()) ? c.share() : 0.0;
  }
  for (const auto& [name, share] : seen) {
    if (name.empty()) continue;
    const bool charged = share >= options_.classes.charge_share;
    NodeState* s = NodeLocked(name);
    if (s == nullptr) continue;
    const NodeClass before = s->tracker.cls();
    if (Touch(&s->recent_seen, w.job(), options_.jobs_kept)) ++s->jobs_seen;
    if (s->first_seen_ns == 0) s->first_seen_ns = w.wall_time_ns();
    s->last_seen_ns = w.wall_time_ns();
    if (charged) {
      s->last_charged_ns = w.wall_time_ns();
      const bool fresh = std::find(s->jobs.begin(), s->jobs.end(), w.job()) == s->jobs.end();
      if (fresh) ++s->jobs_charged;
      Touch(&s->jobs, w.job(), options_.jobs_kept);
    }
    if (s->tracker.Observe(charged, options_.classes)) {
      changes->push_back({SummaryLocked(name, *s), before});
    }
  }
  return true;
}

bool NodeLedger::ApplyHangLocked(const v1::NodeHang& hang) {
  JobNodes& job = jobs_[hang.job()];
  // A stall keeps its start through its changes and across a coordinator restart.
  if (hang.started_unix_ns() == job.last_hang_started_ns) return false;
  job.last_hang_started_ns = hang.started_unix_ns();
  ++counters_.hangs;
  // One hang per node however many of its ranks are named; a dead one says more than a stuck.
  std::map<std::string, const v1::StuckRank*> by_node;
  for (const v1::StuckRank& r : hang.ranks()) {
    if (r.node().empty()) {
      ++counters_.unattributed;
      continue;
    }
    auto [it, fresh] = by_node.emplace(r.node(), &r);
    if (!fresh && r.role() == "dead" && it->second->role() != "dead") it->second = &r;
  }
  for (const auto& [name, r] : by_node) {
    NodeState* s = NodeLocked(name);
    if (s == nullptr) continue;
    const bool dead = r->role() == "dead";
    ++s->hangs;
    if (dead) ++s->hangs_dead;
    s->last_hang_ns = hang.wall_time_ns();
    s->last_hang = absl::StrCat("job ", hang.job(), " rank ", r->rank(),
                                r->stage().empty() ? " between steps" : " stage ", r->stage(),
                                " step ", r->step(), dead ? " (dead)" : " (hung)");
  }
  return true;
}

void NodeLedger::OnJobRetired(const std::string& job) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.erase(job);
}

void NodeLedger::OnJobStall(const std::string& job, const v1::Stall& stall, int64_t wall_ns) {
  if (stall.ended() || !stall.alarm()) return;
  if (stall.reason() != "hung" && stall.reason() != "dead") return;
  v1::NodeHang hang;
  hang.set_job(job);
  hang.set_started_unix_ns(stall.started_unix_ns());
  hang.set_reason(stall.reason());
  hang.set_wall_time_ns(wall_ns);
  for (const v1::StuckRank& r : stall.ranks()) {
    if (r.role() != "stuck" && r.role() != "dead") continue;  // the waiting are victims
    v1::StuckRank* kept = hang.add_ranks();
    *kept = r;
    kept->set_node(Utf8Prefix(r.node(), 256));
    kept->set_stage(Utf8Prefix(r.stage(), 256));
  }
  // Nobody named yet: a later change of the same stall that names a rank is charged then.
  if (hang.ranks().empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!ApplyHangLocked(hang)) return;
  v1::JournalRecord rec;
  *rec.mutable_node_hang() = std::move(hang);
  file_->Append(rec);
}

void NodeLedger::ApplyHostLocked(const v1::NodeHostSeen& seen) {
  if (seen.node().empty()) return;
  auto it = hosts_.find(seen.node());
  if (it == hosts_.end() && hosts_.size() >= options_.max_nodes) return;
  hosts_[seen.node()] = {seen.host(), seen.address()};
}

void NodeLedger::NoteHost(const std::string& node, const std::string& host,
                          const std::string& address, int64_t wall_time_ns) {
  v1::NodeHostSeen seen;
  seen.set_node(Utf8Prefix(node, 256));
  seen.set_host(Utf8Prefix(host, 256));
  seen.set_address(Utf8Prefix(address, 256));
  seen.set_wall_time_ns(wall_time_ns);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = hosts_.find(seen.node());
  if (seen.node().empty() ||
      (it != hosts_.end() && it->second == std::make_pair(seen.host(), seen.address()))) {
    return;
  }
  ApplyHostLocked(seen);
  if (hosts_.count(seen.node()) == 0) return;  // over the bound
  v1::JournalRecord rec;
  *rec.mutable_node_host() = std::move(seen);
  file_->Append(rec);
}

bool NodeLedger::Record(const v1::NodeWindow& window) {
  std::vector<Change> changes;
  ClassChange callback;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Only a changed node set is written (most windows repeat the last one).
    v1::NodeWindow stored = window;
    auto it = jobs_.find(window.job());
    const bool same = it != jobs_.end() && window.nodes_changed() &&
                      std::equal(it->second.nodes.begin(), it->second.nodes.end(),
                                 window.nodes().begin(), window.nodes().end());
    if (same) {
      stored.clear_nodes();
      stored.set_nodes_changed(false);
    }
    if (!ApplyLocked(stored, &changes)) return false;
    v1::JournalRecord rec;
    *rec.mutable_node_window() = std::move(stored);
    file_->Append(rec);
    callback = on_change_;
  }
  if (callback) {
    for (const Change& c : changes) callback(c.node, c.before);
  }
  return true;
}

void NodeLedger::OnJobWindow(const ClosedJobWindow& w) {
  // A duplicate (a window at or before the job's last) changes nothing: nothing to tell.
  (void)Record(NodeWindowFromVerdict(w.job, w.world_size, *w.schema, *w.verdict, w.rank_nodes,
                                     !w.unreliable.empty(), w.wall_time_ns));
}

absl::Status NodeLedger::Flush() { return file_->Flush(); }

NodeSummary NodeLedger::SummaryLocked(const std::string& name, const NodeState& s) const {
  NodeSummary out;
  out.node = name;
  out.cls = s.tracker.cls();
  out.ewma = s.tracker.ewma();
  out.gpu_seconds = s.gpu_seconds;
  for (const auto& [stage, cost] : s.stages) out.stages.push_back(cost);
  std::sort(out.stages.begin(), out.stages.end(), [](const auto& a, const auto& b) {
    return a.gpu_seconds != b.gpu_seconds ? a.gpu_seconds > b.gpu_seconds : a.stage < b.stage;
  });
  out.windows = s.tracker.windows();
  out.charged_windows = s.tracker.charged_windows();
  out.episodes = s.tracker.episodes();
  out.jobs_seen = s.jobs_seen;
  out.jobs_charged = s.jobs_charged;
  out.jobs = s.jobs;
  out.first_seen_ns = s.first_seen_ns;
  out.last_seen_ns = s.last_seen_ns;
  out.last_charged_ns = s.last_charged_ns;
  if (auto it = hosts_.find(name); it != hosts_.end()) {
    out.host = it->second.first;
    out.address = it->second.second;
  }
  out.hangs = s.hangs;
  out.hangs_dead = s.hangs_dead;
  out.last_hang_ns = s.last_hang_ns;
  out.last_hang = s.last_hang;
  return out;
}

namespace {
// Most wasted GPU-seconds first, then most hangs; ties keep their (name) order.
template <typename Node>
void SortByCost(std::vector<Node>* nodes) {
  std::stable_sort(nodes->begin(), nodes->end(), [](const Node& a, const Node& b) {
    return a.gpu_seconds != b.gpu_seconds ? a.gpu_seconds > b.gpu_seconds : a.hangs > b.hangs;
  });
}
}  // namespace

std::vector<NodeSummary> NodeLedger::Nodes() const {
  std::vector<NodeSummary> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out.reserve(nodes_.size());
    for (const auto& [name, s] : nodes_) out.push_back(SummaryLocked(name, s));
  }
  SortByCost(&out);
  return out;
}

std::vector<NodeGauge> NodeLedger::Gauges() const {
  std::vector<NodeGauge> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out.reserve(nodes_.size());
    for (const auto& [name, s] : nodes_) {
      out.push_back({.node = name,
                     .cls = s.tracker.cls(),
                     .gpu_seconds = s.gpu_seconds,
                     .charged_windows = s.tracker.charged_windows(),
                     .hangs = s.hangs});
    }
  }
  SortByCost(&out);
  return out;
}

NodeLedgerCounters NodeLedger::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void NodeLedger::SetClassChange(ClassChange callback) {
  std::lock_guard<std::mutex> lock(mu_);
  on_change_ = std::move(callback);
}

}  // namespace stagefrontier
