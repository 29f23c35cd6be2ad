// Turns closed verdicts into capture requests: the capture policy (capture_policy.h) decides,
// and for each capture asked, every chosen rank gets a control request with the trace window
// (the stub's `should_capture_trace`; stagefrontier.torch then runs torch.profiler for exactly
// those steps). Requests are queued under the job's lock (OnJobWindow) and sent later by
// Flush, outside every job lock.
//
//   CaptureTrigger trigger(CapturePolicyOptions{});
//   job_options.observers.push_back(&trigger);
//   ... every tick: trigger.Flush(&sessions);  // SidecarSessions, a ControlRequestSender
//
// A capture counts as finished (the next may then start, after the policy's cooldown) at the
// first window close after every rank it asked answered done or failed (the stub's answer,
// relayed in the sidecars' health reports: OnCaptureAnswer), or once the job is past its last
// step by the lead it was asked with, whichever comes first: a trainer without a capture
// handler never answers. A capture whose first step the job never reaches is missed (its
// decision's `missed` says why): when the job finishes before it (OnJobFinished), or when no
// window closed for the policy's finish_timeout_seconds (and three window intervals) while the
// job was short of it (MissStalled, from the coordinator's tick).
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_TRIGGER_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_TRIGGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/captures/capture_policy.h"
#include "daemon/events/capture_answer_observer.h"
#include "daemon/events/control_request_sender.h"
#include "daemon/events/verdict_observer.h"

namespace stagefrontier {

class CaptureTrigger : public VerdictObserver, public CaptureAnswerObserver {
 public:
  // `log` gets one line per capture asked, and one per new reason to skip (from Flush,
  // outside the job's lock).
  explicit CaptureTrigger(CapturePolicyOptions options,
                          std::function<void(const std::string&)> log = nullptr)
      : policy_(std::move(options)), log_(std::move(log)) {}

  // Automatic captures on verdicts (--captures); off, windows only keep the job's pace and the
  // rank the newest verdict named (for captures asked by hand).
  void set_automatic(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    automatic_ = on;
  }

  void OnJobWindow(const ClosedJobWindow& window) override;
  // Ends the capture in flight: missed if it starts after `last_step`. Until a window of
  // another newest step closes (a re-run), a capture asked by hand is refused and one asked
  // automatically (a last window closing late) is missed at once.
  void OnJobFinished(const std::string& job, int64_t last_step, int64_t now_ns) override;
  // On a stall that is an alarm, asks the ranks it names for their stacks at once
  // (CapturePolicy::OnStall), whether captures are automatic or not: a hang leaves no later
  // moment to ask.
  void OnJobStall(const std::string& job, const v1::Stall& stall, int64_t wall_ns) override;
  // Forgets the job's pace, answers and capture decisions.
  void OnJobRetired(const std::string& job) override;
  // A sidecar's answer to a stack request: a refusal (no dump handler, a process that does
  // not check out) is kept as that rank's answer, so the report says why its stacks are
  // missing.
  void OnControlAck(const v1::ControlAck& ack) override;
  // Marks missed each capture in flight whose job has not reached its first step and closed no
  // window for the stall bound; returns how many.
  int MissStalled(int64_t now_ns);
  // Notes a rank's answer to the capture whose window starts at health.capture_first_step();
  // answers to no capture the policy still holds are ignored.
  void OnCaptureAnswer(const std::string& job, const v1::SlotHealth& health) override;
  // Each rank of `d`, in d.ranks() order, with its answer (state 0 when none came).
  std::vector<RankCaptureAnswer> Answers(const std::string& job, const CaptureDecision& d) const;
  // Called (outside every lock, from the thread that passed the answer) when a rank first
  // answers failed: its file will never come (the reports stop waiting for it). Set before
  // the ingest server starts.
  void SetOnRankFailed(std::function<void(const std::string& job)> f) {
    on_rank_failed_ = std::move(f);
  }
  // Called from Flush, outside every lock and before the requests go out, with each capture
  // asked since the previous Flush (CaptureReports::Remember keeps it on disk). Set before
  // the first window.
  void SetOnAsked(std::function<void(const std::string& job, const CaptureDecision&)> f) {
    on_asked_ = std::move(f);
  }
  // Capture ids go on from `first` (CaptureReports::HighestIdIn + 1 after a restart).
  void SeedNextId(uint64_t first) {
    std::lock_guard<std::mutex> lock(mu_);
    policy_.SeedNextId(first);
  }

  // A capture asked by hand (Control(capture)): the policy's Manual, then queued like the
  // automatic ones. `job_control` carries the job-wide settings; `world_size` bounds the ranks.
  [[nodiscard]] absl::StatusOr<CaptureDecision> Manual(
      const std::string& job, const std::vector<int32_t>& ranks, int32_t steps, int32_t world_size,
      int64_t newest_step, const v1::ControlRequest& job_control, int64_t now_ns);

  // Sends the queued requests; returns how many reached a sidecar. A request no sidecar took
  // (the rank's node is gone) is counted in unreached() and dropped.
  int Flush(ControlRequestSender* sender);

  struct Counters {
    uint64_t asked = 0;    // captures asked
    uint64_t skipped = 0;  // windows decided without a capture
    uint64_t requests_sent = 0;
    uint64_t unreached = 0;
    uint64_t ranks_done = 0;    // ranks that answered done
    uint64_t ranks_failed = 0;  // ranks that answered failed
  };
  Counters counters() const;
  std::vector<CaptureDecision> Decisions(const std::string& job) const;
  // Capture `id` of `job`, if the policy still holds it.
  std::optional<CaptureDecision> Decision(const std::string& job, uint64_t id) const;
  int32_t default_steps() const { return policy_.options().steps; }

 private:
  struct JobPace;
  // Ends the capture in flight if the job is past its steps or every rank answered; mu_ held.
  void MaybeFinishLocked(const std::string& job, JobPace& pace, int64_t newest_step,
                         int64_t now_ns);
  // Ends the capture in flight as missed, `why`; mu_ held.
  void MissLocked(const std::string& job, JobPace& pace, const std::string& why, int64_t now_ns);
  // Keeps a rank's answer if it answers a capture the policy holds; true if the rank newly
  // failed. mu_ held.
  bool NoteAnswerLocked(const std::string& job, const std::pair<int64_t, int32_t>& key,
                        const RankCaptureAnswer& a);
  // Queues a stack request for each rank of stack capture `d`; mu_ held.
  void QueueStacksLocked(const std::string& job, const CaptureDecision& d);
  // Queues the trace window of `d` for each of its ranks; mu_ held.
  void QueueLocked(const std::string& job, const CaptureDecision& d,
                   const v1::ControlRequest& job_control);

  struct JobPace {
    int64_t step = -1;
    int64_t ns = 0;
    double steps_per_second = 0;
    uint64_t in_flight = 0;
    int64_t in_flight_first_step = -1;
    int64_t in_flight_asked_step = -1;  // the job's newest step when it was asked
    int64_t in_flight_asked_ns = 0;
    int64_t done_after_step = -1;
    int64_t window_ns = 0;       // between the last two window closes
    int64_t ended_at_step = -1;  // OnJobFinished's last step; -1 while the job runs
    std::vector<std::string> stage_names;
    int32_t focus_rank = -1;  // the newest rank-naming verdict's top cell
    std::string focus_stage;
  };

  mutable std::mutex mu_;
  bool automatic_ = true;
  CapturePolicy policy_;
  std::map<std::string, JobPace> pace_;
  // Per job, the answers by (the capture's first step, rank); a stack capture's by
  // (-its id, rank).
  std::map<std::string, std::map<std::pair<int64_t, int32_t>, RankCaptureAnswer>> answers_;
  std::function<void(const std::string&)> log_;
  std::function<void(const std::string&)> on_rank_failed_;
  std::function<void(const std::string&, const CaptureDecision&)> on_asked_;
  std::vector<std::pair<std::string, CaptureDecision>> asked_outbox_;
  std::vector<v1::ControlRequest> outbox_;
  std::vector<std::string> log_lines_;
  Counters counters_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_TRIGGER_H_
