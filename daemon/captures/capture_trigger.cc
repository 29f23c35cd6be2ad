#include "daemon/captures/capture_trigger.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace stagefrontier {
namespace {

// Capture requests' ids, apart from the query service's (which count from 1).
constexpr uint64_t kCaptureRequestIds = uint64_t{1} << 48;

}  // namespace

void CaptureTrigger::OnJobWindow(const ClosedJobWindow& w) {
  if (w.verdict == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  JobPace& pace = pace_[w.job];
  // The job's step rate, from one window close to the next.
  if (pace.step >= 0 && w.newest_step > pace.step && w.now_ns > pace.ns) {
    pace.steps_per_second = static_cast<double>(w.newest_step - pace.step) * 1e9 /
                            static_cast<double>(w.now_ns - pace.ns);
  }
  pace.step = w.newest_step;
  pace.ns = w.now_ns;
  if (pace.in_flight != 0 && w.newest_step > pace.done_after_step) {
    policy_.OnCaptureFinished(w.job, pace.in_flight, w.now_ns);
    pace.in_flight = 0;
  }
  if (w.schema != nullptr && pace.stage_names.size() != w.schema->size()) {
    pace.stage_names.clear();
    for (const Stage& s : w.schema->stages()) pace.stage_names.push_back(s.name);
  }
  const Verdict& named = *w.verdict;
  if (named.label != VerdictLabel::kHealthy && !named.group_wide && !named.suspects.empty() &&
      named.suspects[0].stage >= 0 &&
      static_cast<size_t>(named.suspects[0].stage) < pace.stage_names.size()) {
    pace.focus_rank = named.suspects[0].rank;
    pace.focus_stage = pace.stage_names[static_cast<size_t>(named.suspects[0].stage)];
  }
  if (!automatic_) return;
  CaptureJobFacts facts;
  facts.stage_names = pace.stage_names;
  for (size_t r = 0; r < w.rank_nodes.size(); ++r) {
    facts.ranks.push_back(static_cast<int32_t>(r));
    if (!w.rank_nodes[r].empty()) facts.node_of_rank[static_cast<int32_t>(r)] = w.rank_nodes[r];
  }
  facts.newest_step = w.newest_step;
  facts.steps_per_second = pace.steps_per_second;
  Verdict v = *w.verdict;
  v.unreliable = w.unreliable;
  const std::vector<CaptureDecision> before = policy_.Decisions(w.job);
  const CaptureDecision d = policy_.OnVerdict(w.job, v, facts, w.now_ns);
  if (!d.asked) {
    ++counters_.skipped;
    // Each new reason once (a run of HEALTHY windows is one line).
    if (before.empty() || before.back().asked ||
        ReasonKind(before.back().reason) != ReasonKind(d.reason)) {
      log_lines_.push_back(absl::StrCat("no capture for job ", w.job, " (window ending at step ",
                                        v.last_step, "): ", d.reason));
    }
    return;
  }
  ++counters_.asked;
  log_lines_.push_back(absl::StrCat("capture ", d.id, " of job ", w.job, ": ", d.reason));
  pace.in_flight = d.id;
  pace.done_after_step = d.first_step + d.steps + (d.first_step - w.newest_step);
  QueueLocked(w.job, d, w.job_control);
}

void CaptureTrigger::QueueLocked(const std::string& job, const CaptureDecision& d,
                                 const v1::ControlRequest& job_control) {
  for (int32_t rank : d.ranks()) {
    v1::ControlRequest req = job_control;
    req.set_job(job);
    req.set_request_id(kCaptureRequestIds + d.id);
    req.set_rank(rank);
    req.set_trace_first_step(d.first_step);
    req.set_trace_last_step(d.first_step + d.steps - 1);
    outbox_.push_back(std::move(req));
  }
}

absl::StatusOr<CaptureDecision> CaptureTrigger::Manual(
    const std::string& job, const std::vector<int32_t>& ranks, int32_t steps, int32_t world_size,
    int64_t newest_step, const v1::ControlRequest& job_control, int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  JobPace& pace = pace_[job];
  if (pace.in_flight != 0 && newest_step > pace.done_after_step) {
    policy_.OnCaptureFinished(job, pace.in_flight, now_ns);
    pace.in_flight = 0;
  }
  CaptureJobFacts facts;
  for (int32_t r = 0; r < world_size; ++r) facts.ranks.push_back(r);
  facts.newest_step = newest_step;
  facts.steps_per_second = pace.steps_per_second;
  facts.stage_names = pace.stage_names;
  facts.focus_rank = pace.focus_rank;
  facts.focus_stage = pace.focus_stage;
  absl::StatusOr<CaptureDecision> d = policy_.Manual(job, ranks, steps, facts, now_ns);
  if (!d.ok()) return d;
  ++counters_.asked;
  log_lines_.push_back(absl::StrCat("capture ", d->id, " of job ", job, ": ", d->reason));
  pace.in_flight = d->id;
  pace.done_after_step = d->first_step + d->steps + (d->first_step - newest_step);
  QueueLocked(job, *d, job_control);
  return d;
}

int CaptureTrigger::Flush(SidecarSessions* sessions) {
  std::vector<v1::ControlRequest> out;
  std::vector<std::string> lines;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out.swap(outbox_);
    lines.swap(log_lines_);
  }
  if (log_) {
    for (const std::string& line : lines) log_(line);
  }
  int reached = 0;
  uint64_t unreached = 0;
  for (const v1::ControlRequest& req : out) {
    if (sessions->Send(req) > 0) {
      ++reached;
    } else {
      ++unreached;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  counters_.requests_sent += static_cast<uint64_t>(reached);
  counters_.unreached += unreached;
  return reached;
}

CaptureTrigger::Counters CaptureTrigger::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

std::vector<CaptureDecision> CaptureTrigger::Decisions(const std::string& job) const {
  std::lock_guard<std::mutex> lock(mu_);
  return policy_.Decisions(job);
}

std::optional<CaptureDecision> CaptureTrigger::Decision(const std::string& job, uint64_t id) const {
  for (const CaptureDecision& d : Decisions(job)) {
    if (d.asked && d.id == id) return d;
  }
  return std::nullopt;
}

}  // namespace stagefrontier
