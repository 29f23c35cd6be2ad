#include "daemon/captures/capture_trigger.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "daemon/common/log_safe.h"
#include "daemon/common/utf8_prefix.h"
#include "shm/control_channel.h"

namespace stagefrontier {
namespace {

// Capture requests' ids, apart from the query service's (which count from 1).
constexpr uint64_t kCaptureRequestIds = uint64_t{1} << 48;

// Where a rank's answer to `d` is kept in CaptureTrigger::answers_.
std::pair<int64_t, int32_t> AnswerKey(const CaptureDecision& d, int32_t rank) {
  return {d.kind == CaptureKind::kStacks ? -static_cast<int64_t>(d.id) : d.first_step, rank};
}

CaptureStallFacts StallFacts(const v1::Stall& stall) {
  CaptureStallFacts f;
  f.kind = stall.reason();
  f.alarm = stall.alarm();
  f.ended = stall.ended();
  f.started_unix_ns = stall.started_unix_ns();
  f.text = stall.text();
  for (const v1::StuckRank& r : stall.ranks()) {
    f.ranks.push_back({.rank = r.rank(),
                       .role = r.role(),
                       .stage = r.stage(),
                       .step = r.step(),
                       .open_ns = r.open_ns()});
  }
  return f;
}

}  // namespace

void CaptureTrigger::OnJobStall(const std::string& job, const v1::Stall& stall, int64_t wall_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  // The stall's own clock is realtime; the policy's hourly cap counts in it too.
  const CaptureDecision d = policy_.OnStall(job, StallFacts(stall), wall_ns, wall_ns);
  if (!d.asked) {
    if (!d.reason.empty()) {
      ++counters_.skipped;
      log_lines_.push_back(absl::StrCat("no stacks for job ", job, ": ", d.reason));
    }
    return;
  }
  ++counters_.asked;
  asked_outbox_.emplace_back(job, d);
  log_lines_.push_back(absl::StrCat("capture ", d.id, " of job ", job, ": ", d.reason));
  QueueStacksLocked(job, d);
}

void CaptureTrigger::QueueStacksLocked(const std::string& job, const CaptureDecision& d) {
  for (int32_t rank : d.ranks()) {
    v1::ControlRequest req;
    req.set_job(job);
    req.set_request_id(kCaptureRequestIds + d.id);
    req.set_rank(rank);
    req.set_sets(shm::kControlSetsStacks);  // nothing else of the rank's control changes
    req.set_stacks_capture_id(d.id);
    outbox_.push_back(std::move(req));
  }
}

void CaptureTrigger::OnControlAck(const v1::ControlAck& ack) {
  if (ack.request_id() <= kCaptureRequestIds || ack.rank() < 0) return;
  const uint64_t id = ack.request_id() - kCaptureRequestIds;
  std::lock_guard<std::mutex> lock(mu_);
  const std::optional<CaptureDecision> d = [&]() -> std::optional<CaptureDecision> {
    for (const CaptureDecision& c : policy_.Decisions(ack.job())) {
      if (c.asked && c.id == id && c.kind == CaptureKind::kStacks) return c;
    }
    return std::nullopt;
  }();
  if (!d) return;
  RankCaptureAnswer a;
  a.rank = ack.rank();
  a.state = ack.applied() ? shm::v1::kCaptureRunning : shm::v1::kCaptureFailed;
  a.error = ack.applied() ? "" : Utf8Prefix(ack.error(), 300);
  const auto key = AnswerKey(*d, ack.rank());
  auto& answers = answers_[ack.job()];
  if (answers.count(key) && answers[key] == a) return;
  answers[key] = a;
  if (!ack.applied()) {
    ++counters_.ranks_failed;
    log_lines_.push_back(absl::StrCat("capture ", id, " of job ", ack.job(), ": rank ", ack.rank(),
                                      ": no stacks: ", LogSafe(a.error, 300)));
  }
}

void CaptureTrigger::OnJobWindow(const ClosedJobWindow& w) {
  if (w.verdict == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  JobPace& pace = pace_[w.job];
  // The job's step rate, from one window close to the next.
  if (pace.step >= 0 && w.newest_step > pace.step && w.now_ns > pace.ns) {
    pace.steps_per_second = static_cast<double>(w.newest_step - pace.step) * 1e9 /
                            static_cast<double>(w.now_ns - pace.ns);
    pace.window_ns = w.now_ns - pace.ns;
  }
  // A window of another newest step than the end's: the job runs again (a re-run).
  if (pace.ended_at_step >= 0 && w.newest_step != pace.ended_at_step) pace.ended_at_step = -1;
  pace.step = w.newest_step;
  pace.ns = w.now_ns;
  MaybeFinishLocked(w.job, pace, w.newest_step, w.now_ns);
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
  for (size_t r = 0; r < w.rank_can_capture.size(); ++r) {
    // Not known yet counts as cannot: a capture asked of a trainer that cannot take it costs
    // its steps of evidence for nothing.
    if (w.rank_can_capture[r] != 1) facts.cannot_capture.insert(static_cast<int32_t>(r));
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
  asked_outbox_.emplace_back(w.job, d);
  log_lines_.push_back(absl::StrCat("capture ", d.id, " of job ", w.job, ": ", d.reason));
  pace.in_flight = d.id;
  pace.in_flight_first_step = d.first_step;
  pace.in_flight_asked_step = w.newest_step;
  pace.in_flight_asked_ns = w.now_ns;
  pace.done_after_step = d.first_step + d.steps + (d.first_step - w.newest_step);
  QueueLocked(w.job, d, w.job_control);
  if (pace.ended_at_step >= 0 && d.first_step > pace.ended_at_step) {
    MissLocked(w.job, pace,
               absl::StrCat("the job ended at step ", pace.ended_at_step,
                            " before the capture's first step ", d.first_step),
               w.now_ns);
  }
}

void CaptureTrigger::MaybeFinishLocked(const std::string& job, JobPace& pace, int64_t newest_step,
                                       int64_t now_ns) {
  if (pace.in_flight == 0) return;
  bool finished = newest_step > pace.done_after_step;
  if (!finished) {
    // Every rank answered done or failed: nothing more will come of this capture.
    const auto answers = answers_.find(job);
    for (const CaptureDecision& d : policy_.Decisions(job)) {
      if (d.id != pace.in_flight || answers == answers_.end()) continue;
      finished = true;
      for (int32_t rank : d.ranks()) {
        const auto a = answers->second.find({d.first_step, rank});
        if (a == answers->second.end() || (a->second.state != shm::v1::kCaptureDone &&
                                           a->second.state != shm::v1::kCaptureFailed)) {
          finished = false;
        }
      }
    }
  }
  if (!finished) return;
  policy_.OnCaptureFinished(job, pace.in_flight, now_ns);
  pace.in_flight = 0;
}

void CaptureTrigger::MissLocked(const std::string& job, JobPace& pace, const std::string& why,
                                int64_t now_ns) {
  log_lines_.push_back(absl::StrCat("capture ", pace.in_flight, " of job ", job, " missed: ", why));
  policy_.OnCaptureMissed(job, pace.in_flight, why, now_ns);
  pace.in_flight = 0;
}

void CaptureTrigger::OnJobFinished(const std::string& job, int64_t last_step, int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  JobPace& pace = pace_[job];
  pace.ended_at_step = last_step;
  if (pace.in_flight == 0) return;
  if (pace.in_flight_first_step > last_step) {
    MissLocked(job, pace,
               absl::StrCat("the job ended at step ", last_step,
                            " before the capture's first step ", pace.in_flight_first_step),
               now_ns);
    return;
  }
  // It overlapped the job's last steps: no further step will come, its answers (if any) stand.
  policy_.OnCaptureFinished(job, pace.in_flight, now_ns);
  pace.in_flight = 0;
}

void CaptureTrigger::OnJobRetired(const std::string& job) {
  std::lock_guard<std::mutex> lock(mu_);
  pace_.erase(job);
  answers_.erase(job);
  policy_.Forget(job);
}

int CaptureTrigger::MissStalled(int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  // A slow job closes windows rarely: wait for three of its window intervals at least.
  const int64_t timeout_ns = static_cast<int64_t>(policy_.options().finish_timeout_seconds * 1e9);
  int missed = 0;
  for (auto& [job, pace] : pace_) {
    const int64_t step = std::max(pace.step, pace.in_flight_asked_step);
    if (pace.in_flight == 0 || step >= pace.in_flight_first_step) continue;
    const int64_t idle_ns = now_ns - std::max(pace.ns, pace.in_flight_asked_ns);
    if (idle_ns <= std::max(timeout_ns, 3 * pace.window_ns)) continue;
    MissLocked(
        job, pace,
        absl::StrCat("the job made no progress past step ", step, " for ", idle_ns / 1'000'000'000,
                     " s before the capture's first step ", pace.in_flight_first_step),
        now_ns);
    ++missed;
  }
  return missed;
}

void CaptureTrigger::OnCaptureAnswer(const std::string& job, const v1::SlotHealth& h) {
  RankCaptureAnswer a;
  a.rank = h.rank();
  a.state = h.capture_state();
  a.failure = h.capture_failure();
  a.bytes = h.capture_bytes();
  const std::pair<int64_t, int32_t> key{h.capture_first_step(), h.rank()};
  bool newly_failed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    newly_failed = NoteAnswerLocked(job, key, a);
  }
  if (newly_failed && on_rank_failed_) on_rank_failed_(job);
}

bool CaptureTrigger::NoteAnswerLocked(const std::string& job,
                                      const std::pair<int64_t, int32_t>& key,
                                      const RankCaptureAnswer& a) {
  auto job_answers = answers_.find(job);
  if (job_answers != answers_.end()) {
    const auto known = job_answers->second.find(key);
    if (known != job_answers->second.end() && known->second == a) return false;  // a repeat
  }
  // Only answers to a capture the policy holds (it keeps the newest few per job).
  const std::vector<CaptureDecision> decisions = policy_.Decisions(job);
  int64_t oldest = INT64_MAX;
  bool ours = false;
  for (const CaptureDecision& d : decisions) {
    if (!d.asked || d.kind != CaptureKind::kTrace) continue;
    oldest = std::min(oldest, d.first_step);
    const std::vector<int32_t> ranks = d.ranks();
    if (d.first_step == key.first && std::find(ranks.begin(), ranks.end(), a.rank) != ranks.end()) {
      ours = true;
    }
  }
  if (!ours) return false;
  auto& answers = answers_[job];
  // Stack captures' answers (negative keys) are dropped with their decisions below.
  std::erase_if(answers, [&](const auto& e) {
    if (e.first.first >= 0) return e.first.first < oldest;
    return std::none_of(decisions.begin(), decisions.end(), [&](const CaptureDecision& d) {
      return d.asked && -static_cast<int64_t>(d.id) == e.first.first;
    });
  });
  const bool terminal_before =
      answers.count(key) > 0 && (answers[key].state == shm::v1::kCaptureDone ||
                                 answers[key].state == shm::v1::kCaptureFailed);
  answers[key] = a;
  if (!terminal_before && a.state == shm::v1::kCaptureDone) ++counters_.ranks_done;
  if (!terminal_before && a.state == shm::v1::kCaptureFailed) {
    ++counters_.ranks_failed;
    log_lines_.push_back(absl::StrCat("capture of job ", job, " from step ", key.first, ": rank ",
                                      a.rank, " failed (", shm::CaptureFailureName(a.failure),
                                      ")"));
    return true;
  }
  return false;
}

std::vector<RankCaptureAnswer> CaptureTrigger::Answers(const std::string& job,
                                                       const CaptureDecision& d) const {
  std::vector<RankCaptureAnswer> out;
  std::lock_guard<std::mutex> lock(mu_);
  const auto answers = answers_.find(job);
  for (int32_t rank : d.ranks()) {
    RankCaptureAnswer a;
    a.rank = rank;
    if (answers != answers_.end()) {
      const auto it = answers->second.find(AnswerKey(d, rank));
      if (it != answers->second.end()) a = it->second;
    }
    out.push_back(a);
  }
  return out;
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
    req.set_sets(shm::kControlSetsTrace);  // a self-test of the rank stays
    outbox_.push_back(std::move(req));
  }
}

absl::StatusOr<CaptureDecision> CaptureTrigger::Manual(
    const std::string& job, const std::vector<int32_t>& ranks, int32_t steps, int32_t world_size,
    int64_t newest_step, const v1::ControlRequest& job_control, int64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  JobPace& pace = pace_[job];
  if (pace.ended_at_step >= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job, " finished at step ", pace.ended_at_step,
                     " (every rank exited): no step is left to capture"));
  }
  MaybeFinishLocked(job, pace, newest_step, now_ns);
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
  asked_outbox_.emplace_back(job, *d);
  log_lines_.push_back(absl::StrCat("capture ", d->id, " of job ", job, ": ", d->reason));
  pace.in_flight = d->id;
  pace.in_flight_first_step = d->first_step;
  pace.in_flight_asked_step = newest_step;
  pace.in_flight_asked_ns = now_ns;
  pace.done_after_step = d->first_step + d->steps + (d->first_step - newest_step);
  QueueLocked(job, *d, job_control);
  return d;
}

int CaptureTrigger::Flush(ControlRequestSender* sender) {
  std::vector<v1::ControlRequest> out;
  std::vector<std::string> lines;
  std::vector<std::pair<std::string, CaptureDecision>> asked;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out.swap(outbox_);
    lines.swap(log_lines_);
    asked.swap(asked_outbox_);
  }
  if (log_) {
    for (const std::string& line : lines) log_(line);
  }
  if (on_asked_) {
    for (const auto& [job, d] : asked) on_asked_(job, d);
  }
  int reached = 0;
  uint64_t unreached = 0;
  for (const v1::ControlRequest& req : out) {
    if (sender->Send(req) > 0) {
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
