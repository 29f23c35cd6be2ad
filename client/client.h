// The StageFrontier stub, C++ API: marks the stages of every training step into this node's
// shared-memory segment, where the sidecar picks them up.
//
// A mark costs about one clock read. Marks and steps never block, never allocate, never make
// a system call and never throw. If the segment cannot be used (no permission, a newer
// layout, a damaged file, another live process owns this local rank) the client says why once
// on stderr and goes on as a no-op that counts the steps it could not record. If the segment
// file is truncated while in use, the process survives (shm/mapping_guard.h) and the client
// stops recording the same way.
//
// Threading: a Client is driven by one thread at a time (the training loop). Control reads
// (`should_capture_trace`) are safe from that same thread. After fork() (a DataLoader worker,
// say) the child's copy of the client stops recording (it would be a second writer on the
// parent's ring) and counts its steps as not recorded; the parent goes on.
//
//   auto client = stagefrontier::Client::Create({{"data", StageKind::kIo},
//                                                {"forward", StageKind::kCompute},
//                                                {"backward", StageKind::kMixed},
//                                                {"optimizer", StageKind::kCompute}});
//   if (!client.ok()) { /* a bad schema or environment: client.status() says which */ }
//   const auto kData = (*client)->stage_id("data");
//   for (...) {
//     (*client)->BeginStep();
//     { auto scope = (*client)->Scope(kData); LoadBatch(); }
//     ...
//     (*client)->EndStep();
//   }
//
// Hang dumps (client/hang_dump.h): EnableHangDumps({}) lets the coordinator ask this rank for
// its stacks when the job hangs: the sidecar signals it (SIGUSR2 by default) and a thread of
// the stub writes <capture dir>/<job>/stacks_rank<R>_capture<ID>.txt, with what an optional
// callback adds. Nothing of it runs in the marks or steps. The callback must not block nor take
// a lock the training thread may hold: it runs while the trainer is hung, and Close() and
// ~Client wait for it without a time limit.
#ifndef STAGEFRONTIER_CLIENT_CLIENT_H_
#define STAGEFRONTIER_CLIENT_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/hang_dump.h"
#include "client/launcher_environment.h"
#include "client/step_recorder.h"
#include "shm/control_channel.h"
#include "shm/monotonic_clock.h"
#include "shm/open_stage.h"
#include "shm/ring_writer.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

namespace shm {
class MappedSegment;
}

namespace client_internal {
// Incremented in every child created by fork(): a client compares it with the value it saw at
// creation (one relaxed load, no getpid() system call).
extern std::atomic<uint64_t> g_fork_generation;
}  // namespace client_internal

struct ClientStats {
  uint64_t steps_begun = 0;
  uint64_t steps_recorded = 0;      // published to the ring
  uint64_t steps_dropped_full = 0;  // ring full (no sidecar, or it fell behind)
  uint64_t steps_not_recorded = 0;  // recording disabled: no usable segment
  uint64_t steps_paused = 0;        // a control request paused recording
  uint64_t steps_sampled_out = 0;   // a control request asked for one step in N
  uint64_t misuse = 0;              // calls that made no sense, ignored
  uint64_t control_updates = 0;     // control requests applied
  uint64_t selftest_steps = 0;      // steps a self-test delay was added to (sfctl selftest)
  uint64_t selftest_refused = 0;    // self-test requests refused (not allowed, bad request)
  // Steps the sidecar and coordinator would refuse (shm/record_limits.h: a step number outside
  // [0, 2^40), a stage longer than a day): counted here, never published.
  uint64_t steps_invalid = 0;
  uint64_t captures_begun = 0;     // capture answers: the profiler runs
  uint64_t captures_done = 0;      // the trace was written
  uint64_t captures_failed = 0;    // failed (busy, start, write, callback, missed)
  uint64_t dumps_written = 0;      // hang dumps written and answered (hang_dump.h)
  uint64_t dumps_unrequested = 0;  // dump signals without a request (text went to stderr)
  uint64_t dump_errors = 0;        // hang dumps that could not be written
};

class Client {
 public:
  using StageId = uint32_t;
  static constexpr StageId kNoStage = ~0U;

  // Declares the schema (1..32 stages, unique names of 1..39 characters from [A-Za-z0-9_.-])
  // and attaches to the segment, creating it if needed. Fails with InvalidArgument only for a
  // bad schema, a bad identity (see launcher_environment.h) or a bad options.layout (naming the
  // field and its value; RankLayout says what is checked); segment problems do not fail, they
  // disable recording (enabled() is false, disabled_reason() says why).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Client>> Create(
      std::vector<Stage> stages, const ClientOptions& options = {}, const GetEnv& getenv = nullptr);

  ~Client();
  Client(const Client&) = delete;
  // Stops recording and gives the slot back now, as the destructor does (for runtimes that
  // may never destroy the client at exit, e.g. Python's): the next process of this local rank
  // takes the slot without a "took over" warning. Later marks are not recorded. Idempotent.
  void Close() noexcept;
  Client& operator=(const Client&) = delete;

  // Index of the stage called `name`, or kNoStage.
  StageId stage_id(const std::string& name) const;
  const StageSchema& schema() const { return schema_; }
  const LauncherIdentity& identity() const { return identity_; }
  // The layout declared, completed (pipeline_stages and tensor_size at least 1), or all zero
  // when none was. Written into the slot at claim; the sidecar declares it to the coordinator.
  const RankLayout& layout() const { return layout_; }
  // How it came by it, or why none (shm::v1::LayoutSource; never 0 once created).
  uint32_t layout_source() const { return layout_source_; }
  bool enabled() const { return enabled_; }
  const std::string& disabled_reason() const { return disabled_reason_; }

  // Starts step `step` (or the one after the previous). A step still open is ended first.
  void BeginStep() noexcept { BeginStep(next_step_); }
  void BeginStep(int64_t step) noexcept;
  // Each of these also publishes the rank's open stage in its slot (docs/segment-format.md,
  // "Open stage"; the sidecar reports it, the coordinator names a hung rank with it): a few
  // stores, no system call. BeginStep opens stage 0 of the step; Enter(k) opens k; after
  // Exit(k) or Mark(k) the next stage in schema order is open, or none after the last
  // ("between steps"), as after EndStep.
  void Enter(StageId k) noexcept {
    const int64_t t = shm::MonotonicNowNs();
    if (recorder_.Enter(k, t)) PublishOpen(t, shm::OpenCode(k));
  }
  void Exit(StageId k) noexcept {
    SelfTestDelayAtEndOf(k);
    const int64_t t = shm::MonotonicNowNs();
    if (recorder_.Exit(k, t)) PublishOpen(t, OpenAfter(k));
  }
  // Stage k ended now; it covers the time since the previous stage ended.
  void Mark(StageId k) noexcept {
    SelfTestDelayAtEndOf(k);
    const int64_t t = shm::MonotonicNowNs();
    if (recorder_.Mark(k, t)) PublishOpen(t, OpenAfter(k));
  }
  // Stage k's scope is left by an exception: its time is recorded as Exit's, but stage k stays
  // published as open, so that a trainer that then ends on the exception is placed where it
  // raised (NoteUncaughtException); one that catches it publishes its next stage as usual.
  void ExitRaising(StageId k) noexcept { recorder_.Exit(k, shm::MonotonicNowNs()); }
  // Stage k ended at t_ns (CLOCK_MONOTONIC), for boundaries known only after the fact.
  void MarkAt(StageId k, int64_t t_ns) noexcept {
    const int64_t t = t_ns + SelfTestDelayAtEndOf(k);
    if (recorder_.Mark(k, t)) PublishOpen(t, OpenAfter(k));
  }
  // Publishes that stage k is open since t_ns without marking anything: for a boundary the
  // trainer learns live but marks only later, such as the end of local backward work in
  // PyTorch's DDP (the wait for the all-reduce begins there; backward is marked when it
  // returns). The stall verdict then sees this rank waiting, not computing.
  void ShowOpen(StageId k, int64_t t_ns) noexcept {
    if (recorder_.in_step() && k < recorder_.stage_count()) PublishOpen(t_ns, shm::OpenCode(k));
  }
  // Ends the step and publishes it (unless paused or sampled out).
  void EndStep() noexcept;
  // The trainer is ending on an uncaught exception: stored in the slot (exit_reason), so that
  // when the slot is released the coordinator reads this rank as gone mid-step, where its open
  // stage says, not as a rank that finished its work. Call it from a top-level handler before
  // exiting (Python's stagefrontier installs one in sys.excepthook; C: sf_note_uncaught_
  // exception). One store, no system call: safe in a std::terminate handler.
  // `in_collective`: the exception is a collective's failure (a peer gone), not the trainer's own.
  void NoteUncaughtException(bool in_collective = false) noexcept;

  class StageScope {
   public:
    StageScope(Client* c, StageId k) noexcept
        : client_(c), stage_(k), exceptions_(std::uncaught_exceptions()) {
      client_->Enter(k);
    }
    ~StageScope() {
      if (std::uncaught_exceptions() > exceptions_) {
        client_->ExitRaising(stage_);
      } else {
        client_->Exit(stage_);
      }
    }
    StageScope(const StageScope&) = delete;
    StageScope& operator=(const StageScope&) = delete;

   private:
    Client* client_;
    StageId stage_;
    int exceptions_;  // in flight at the scope's start: more at its end is an unwind
  };
  // RAII: enters stage k now, exits it when the scope ends.
  [[nodiscard]] StageScope Scope(StageId k) noexcept { return StageScope(this, k); }

  ClientStats stats() const noexcept;
  // The latest control request from the coordinator.
  const shm::ControlRequest& control() const { return control_; }
  // Self-tests (sfctl selftest): the coordinator may ask this stub to add a bounded, known
  // delay to one stage for a few steps, to check that the verdict finds it. Obeyed only when
  // the trainer opted in with STAGEFRONTIER_ALLOW_SELFTEST=1 (read at Create) or
  // ClientOptions::allow_selftest; refused (and answered as such) otherwise. Caps:
  static constexpr uint32_t kMaxSelfTestDelayUs = 1'000'000;
  static constexpr int64_t kMaxSelfTestSteps = 1'000;
  bool selftest_allowed() const { return allow_selftest_; }

  // True if the coordinator asked for a detailed trace of the current (or next) step.
  bool should_capture_trace() const noexcept { return control_.CapturesTrace(current_step_); }
  int64_t current_step() const { return current_step_; }

  // Captures. A C/C++ trainer that drives its own profiler (Nsight through NVTX ranges, CUPTI,
  // a vendor tool) registers callbacks: the stub calls `begin` at the start of the first step
  // it runs of a requested trace window and `end` at the end of the window's last step (or at
  // the next step if the request was withdrawn), on the training thread, and answers the
  // coordinator (running, done, failed). A callback returns 0 on success; anything else, or an
  // exception, fails the capture: counted, answered, and training goes on. Callbacks run inside
  // the step, so they must be quick. Registering replaces earlier callbacks; {} removes them.
  struct CaptureCallbacks {
    int (*begin)(void* user, int64_t first_step, int64_t last_step) = nullptr;
    // May set `*bytes` to the size of what was written (left 0 when unknown).
    int (*end)(void* user, int64_t first_step, int64_t last_step, uint64_t* bytes) = nullptr;
    void* user = nullptr;
  };
  void SetCaptureCallbacks(const CaptureCallbacks& callbacks) noexcept;

  // For a trainer that runs captures itself (stagefrontier.torch). DeclareCaptureHandler says
  // one exists, so that a request whose steps are already past when it arrives is answered
  // "missed" by the stub; AnswerCapture answers the request whose trace window starts at
  // `request_first_step` (capture_first_step() when it began). No-ops while not recording.
  void DeclareCaptureHandler() noexcept;
  void AnswerCapture(int64_t request_first_step, shm::v1::CaptureState state,
                     shm::v1::CaptureFailure failure = shm::v1::kCaptureFailureNone,
                     uint64_t bytes = 0) noexcept;
  // The trace window of the request in force; capture_last_step() < capture_first_step(): none.
  int64_t capture_first_step() const { return control_.trace_first_step; }
  int64_t capture_last_step() const { return control_.trace_last_step; }

  // Hang dumps (hang_dump.h): starts the dumper's thread, installs the signal handler (unless
  // options.install_handler is false) and then tells the sidecar which signal to send.
  // FailedPrecondition: not recording (no segment, closed, a forked child) or the signal has a
  // handler other than SIG_DFL/SIG_IGN already (in both modes: call it before installing your
  // own); AlreadyExists: enabled already; InvalidArgument: not SIGUSR1/SIGUSR2.
  // Close() and the destructor tear it down first, waiting for a running callback without a
  // time limit: options.callback must not block nor take a lock the training thread may hold
  // (it runs while the trainer is hung).
  [[nodiscard]] absl::Status EnableHangDumps(HangDumpOptions options);
  // The pipe a handler of the caller's writes the stacks into (-1 if not enabled).
  int hang_dump_signal_fd() const;
  // With install_handler false: the caller's handler is in place, the sidecar may signal now
  // (HangDumper::Publish). FailedPrecondition when not enabled. May follow UnpublishHangDumps.
  [[nodiscard]] absl::Status PublishHangDumps();
  // The sidecar stops signalling (dump_signal = 0): call it before removing your handler, whose
  // absence would let the signal's default action end the process. OK once closed;
  // FailedPrecondition when not enabled or in a forked child.
  [[nodiscard]] absl::Status UnpublishHangDumps();
  // Returns as soon as more than `after` dump files have been completed (at once if so
  // already): the newest one's capture id and the count; on timeout, when not enabled or once
  // closed: capture_id 0 and the current count. Pass the count last seen so that no dump is
  // lost between two calls. Safe from any thread (Python waits on a daemon thread).
  HangDumpWait WaitForHangDump(std::chrono::milliseconds timeout, uint64_t after);

 private:
  Client(StageSchema schema, LauncherIdentity identity);
  void Attach(bool quiet);
  // True in a process forked from the one that created this client (one relaxed load).
  bool InForkedChild() const noexcept {
    return client_internal::g_fork_generation.load(std::memory_order_relaxed) != fork_generation_;
  }
  // The open stage, into the slot (not from a forked child: the slot is its parent's).
  void PublishOpen(int64_t t, uint32_t code) noexcept {
    if (enabled_ && !InForkedChild()) open_.Publish(current_step_, t, code);
  }
  // What is open once stage k ended: the next stage in schema order, or none.
  uint32_t OpenAfter(StageId k) const noexcept {
    return k + 1 < recorder_.stage_count() ? shm::OpenCode(k + 1) : shm::kOpenBetweenSteps;
  }
  void Disable(std::string reason, bool quiet);
  // Applies a new self-test request from the control block: accepts or refuses it.
  void OnSelfTestRequest() noexcept;
  // At the end of stage k: sleeps the self-test delay if this step still owes it to k and
  // returns it in ns; else 0 (one branch: the steady state pays nothing more).
  int64_t SelfTestDelayAtEndOf(StageId k) noexcept {
    // Not in a child forked mid-step (a DataLoader worker): the delay and its count are the
    // parent's.
    return selftest_pending_ && k == selftest_.stage && !InForkedChild() ? InjectSelfTestDelay()
                                                                         : 0;
  }
  // Sleeps the self-test delay (this step's stage end); returns the delay in ns.
  int64_t InjectSelfTestDelay() noexcept;
  // Captures driven by registered callbacks, at the start and end of step `step`.
  void CaptureAtBeginStep(int64_t step) noexcept;
  void EndCallbackCapture() noexcept;
  // Calls a capture callback; false if it returned non-zero or threw.
  template <typename Call>
  static bool CallCaptureCallback(Call&& call) noexcept;

  StageSchema schema_;
  LauncherIdentity identity_;
  RankLayout layout_;  // completed, or all zero: none declared
  uint32_t layout_source_ = 0;
  StepRecorder recorder_;
  std::unique_ptr<shm::MappedSegment> segment_;
  shm::v1::SlotHeader* slot_ = nullptr;
  uint32_t owner_pid_ = 0;  // this process, as the slot's owner_pid says while it owns it
  shm::RingWriter writer_;
  shm::OpenStageWriter open_;
  bool enabled_ = false;
  std::string disabled_reason_;
  shm::ControlRequest control_;
  uint64_t control_seq_ = 0;
  int64_t current_step_ = 0;
  int64_t next_step_ = 0;
  ClientStats stats_;
  int64_t boundaries_[shm::v1::kMaxStages + 1] = {};
  uint64_t fork_generation_ = 0;
  struct SelfTestPlan {
    uint32_t stage = 0;
    int64_t delay_ns = 0;
    int64_t first_step = 0;
    int64_t last_step = -1;
    bool operator==(const SelfTestPlan&) const = default;
  };
  bool allow_selftest_ = false;
  SelfTestPlan selftest_;           // the accepted request (empty range: none)
  SelfTestPlan selftest_seen_;      // the latest request answered, accepted or not
  bool selftest_pending_ = false;   // the current step still gets its delay
  bool selftest_injected_ = false;  // the current step got it: its record is marked
  CaptureCallbacks capture_callbacks_;
  bool capture_handler_ = false;     // callbacks, or DeclareCaptureHandler
  int64_t capture_seen_first_ = -1;  // the latest trace window handled (its first step)
  int64_t capture_seen_last_ = -1;
  bool capture_running_ = false;       // `begin` succeeded; `end` is owed
  int64_t capture_running_first_ = 0;  // the running capture's request window
  int64_t capture_running_last_ = 0;
  int64_t capture_running_start_ = 0;    // the step `begin` was called at
  int64_t capture_running_through_ = 0;  // the last step it ran through
  // Closed by Close(), destroyed with the client (a waiter on another thread may still use it).
  std::unique_ptr<HangDumper> hang_dumper_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_CLIENT_CLIENT_H_
