#include "client/client.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "shm/record_limits.h"
#include "shm/segment_file.h"
#include "shm/segment_layout_v1.h"
#include "shm/slot_ownership.h"

namespace stagefrontier {
namespace client_internal {
std::atomic<uint64_t> g_fork_generation{0};
}  // namespace client_internal
namespace {

using client_internal::g_fork_generation;
void OnForkChild() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }

// Checks options.layout against the world size and completes it (pipeline_stages and
// tensor_size 0 read as 1 once either is declared); all zero when none is declared.
absl::StatusOr<RankLayout> ResolveLayout(const RankLayout& l, int32_t world_size) {
  constexpr int32_t kMax = 65535;  // the slot holds u16 fields
  if (l.pipeline_stages == 0 && l.tensor_size == 0) {
    if (l.pipeline_stage != 0 || l.tensor_rank != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank layout: pipeline_stage ", l.pipeline_stage, " and tensor_rank ", l.tensor_rank,
          " given without pipeline_stages or tensor_size (all zero declares no layout)"));
    }
    return RankLayout{};
  }
  if (l.pipeline_stages < 0 || l.pipeline_stages > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank layout: pipeline_stages ", l.pipeline_stages, " is outside 1..", kMax));
  }
  if (l.tensor_size < 0 || l.tensor_size > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank layout: tensor_size ", l.tensor_size, " is outside 1..", kMax));
  }
  RankLayout out = l;
  if (out.pipeline_stages == 0) out.pipeline_stages = 1;  // tensor parallelism only
  if (out.tensor_size == 0) out.tensor_size = 1;          // pipeline parallelism only
  if (out.pipeline_stage < 0 || out.pipeline_stage >= out.pipeline_stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank layout: pipeline_stage ", out.pipeline_stage, " is outside 0..",
                     out.pipeline_stages - 1, " (pipeline_stages ", out.pipeline_stages, ")"));
  }
  if (out.tensor_rank < 0 || out.tensor_rank >= out.tensor_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank layout: tensor_rank ", out.tensor_rank,
                                                   " is outside 0..", out.tensor_size - 1,
                                                   " (tensor_size ", out.tensor_size, ")"));
  }
  const int64_t group = int64_t{out.pipeline_stages} * out.tensor_size;
  if (group > world_size || world_size % group != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank layout: pipeline_stages ", out.pipeline_stages, " x tensor_size ",
                     out.tensor_size, " = ", group, " does not divide world size ", world_size));
  }
  return out;
}

// options.layout_source checked against the layout it goes with; 0 gives declared or none.
absl::StatusOr<uint32_t> ResolveLayoutSource(uint32_t source, const RankLayout& layout) {
  const bool declared = layout.pipeline_stages != 0;
  if (source == shm::v1::kLayoutSourceUnset) {
    return declared ? shm::v1::kLayoutSourceDeclared : shm::v1::kLayoutSourceNone;
  }
  if (source > shm::v1::kLayoutSourceMax) {
    return absl::InvalidArgumentError(absl::StrCat("rank layout: layout_source ", source,
                                                   " is outside 0..", shm::v1::kLayoutSourceMax));
  }
  if (shm::v1::LayoutSourceHasLayout(source) != declared) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank layout: layout_source \"", shm::v1::LayoutSourceName(source), "\" ",
        declared ? "says none, but a layout is declared" : "needs a layout, and none is declared"));
  }
  return source;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Create(std::vector<Stage> stages,
                                                       const ClientOptions& options,
                                                       const GetEnv& getenv) {
  // Nothing may escape into the trainer, not even bad_alloc.
  try {
    for (const Stage& s : stages) {
      if (s.name.size() >= shm::v1::kStageNameBytes) {
        return absl::InvalidArgumentError(
            absl::StrCat("stage name \"", s.name, "\" is longer than ",
                         shm::v1::kStageNameBytes - 1, " characters"));
      }
    }
    absl::StatusOr<StageSchema> schema = StageSchema::Create(std::move(stages));
    if (!schema.ok()) return schema.status();
    const GetEnv env = getenv ? getenv : GetEnv([](const char* n) { return ::getenv(n); });
    absl::StatusOr<LauncherIdentity> identity = ResolveIdentity(options, env);
    if (!identity.ok()) return identity.status();
    absl::StatusOr<RankLayout> layout = ResolveLayout(options.layout, identity->world_size);
    if (!layout.ok()) return layout.status();
    absl::StatusOr<uint32_t> layout_source = ResolveLayoutSource(options.layout_source, *layout);
    if (!layout_source.ok()) return layout_source.status();
    static std::once_flag atfork_once;
    std::call_once(atfork_once, [] { pthread_atfork(nullptr, nullptr, &OnForkChild); });
    std::unique_ptr<Client> client(new Client(*std::move(schema), *std::move(identity)));
    client->fork_generation_ = g_fork_generation.load(std::memory_order_relaxed);
    client->layout_ = *layout;
    client->layout_source_ = *layout_source;
    const char* quiet_env = env("STAGEFRONTIER_QUIET");
    const char* selftest_env = env("STAGEFRONTIER_ALLOW_SELFTEST");
    client->allow_selftest_ =
        options.allow_selftest || (selftest_env != nullptr && std::string(selftest_env) == "1");
    client->Attach(options.quiet || (quiet_env != nullptr && *quiet_env == '1'));
    return client;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("stagefrontier client: ", e.what()));
  } catch (...) {
    return absl::InternalError("stagefrontier client: unknown exception");
  }
}

Client::Client(StageSchema schema, LauncherIdentity identity)
    : schema_(std::move(schema)),
      identity_(std::move(identity)),
      recorder_(static_cast<uint32_t>(schema_.size())) {}

Client::~Client() {
  hang_dumper_.reset();
  if (capture_running_ && !InForkedChild()) EndCallbackCapture();
  if (enabled_ && slot_ != nullptr && !InForkedChild()) shm::ReleaseSlot(*slot_);
}

void Client::NoteUncaughtException(bool in_collective) noexcept {
  if (enabled_ && slot_ != nullptr && !InForkedChild()) {
    slot_->exit_reason.store(
        in_collective ? shm::v1::kExitCollectiveException : shm::v1::kExitException,
        std::memory_order_release);
  }
}

void Client::Close() noexcept {
  if (hang_dumper_ != nullptr) hang_dumper_->Close();
  if (capture_running_ && !InForkedChild()) EndCallbackCapture();
  if (enabled_ && slot_ != nullptr && !InForkedChild()) shm::ReleaseSlot(*slot_);
  if (enabled_) Disable("closed", /*quiet=*/true);
}

void Client::Disable(std::string reason, bool quiet) {
  enabled_ = false;
  disabled_reason_ = std::move(reason);
  if (!quiet) {
    std::fprintf(stderr,
                 "stagefrontier: rank %d: recording disabled: %s (the trainer is not affected; "
                 "steps are counted, not recorded)\n",
                 identity_.rank, disabled_reason_.c_str());
  }
}

void Client::Attach(bool quiet) {
  absl::StatusOr<std::unique_ptr<shm::MappedSegment>> seg =
      shm::MappedSegment::OpenOrCreate(SegmentOptionsFor(identity_));
  if (!seg.ok()) return Disable(std::string(seg.status().message()), quiet);
  if (!(*seg)->warning().empty() && !quiet) {
    std::fprintf(stderr, "stagefrontier: rank %d: warning: %s\n", identity_.rank,
                 (*seg)->warning().c_str());
  }
  shm::SlotIdentity id;
  id.rank = identity_.rank;
  id.world_size = identity_.world_size;
  id.local_world_size = identity_.local_world_size;
  // Checked at Create: every field fits the slot's u16 (all zero: none declared).
  id.layout.pipeline_stage = static_cast<uint16_t>(layout_.pipeline_stage);
  id.layout.pipeline_stages = static_cast<uint16_t>(layout_.pipeline_stages);
  id.layout.tensor_rank = static_cast<uint16_t>(layout_.tensor_rank);
  id.layout.tensor_size = static_cast<uint16_t>(layout_.tensor_size);
  id.layout_source = layout_source_;
  for (const Stage& s : schema_.stages()) {
    id.stages.emplace_back(s.name, static_cast<uint8_t>(s.kind));
  }
  const uint32_t local_rank = static_cast<uint32_t>(identity_.local_rank);
  absl::StatusOr<shm::ClaimResult> claim = shm::ClaimSlot((*seg)->view(), local_rank, id);
  if (!claim.ok()) {
    return Disable(absl::StrCat("segment ", (*seg)->path(), ": ", claim.status().message()), quiet);
  }
  if (claim->reclaimed_stale && !quiet) {
    std::fprintf(stderr,
                 "stagefrontier: rank %d: took over local rank %u from pid %u, which exited "
                 "without releasing it%s\n",
                 identity_.rank, local_rank, claim->previous_owner_pid,
                 claim->published_torn ? " mid-record (that record is marked torn)" : "");
  }
  segment_ = *std::move(seg);
  slot_ = &segment_->view().slot(local_rank);
  owner_pid_ = static_cast<uint32_t>(getpid());
  writer_ = shm::RingWriter(segment_->view(), local_rank);
  open_ = shm::OpenStageWriter(slot_);
  enabled_ = true;
}

void Client::BeginStep(int64_t step) noexcept {
  // The open step ends first, so that this step cannot start before the previous one ended.
  if (recorder_.in_step()) EndStep();
  const int64_t t = shm::MonotonicNowNs();
  ++stats_.steps_begun;
  current_step_ = step;
  next_step_ = step < INT64_MAX ? step + 1 : step;  // the caller's number: no overflow
  if (enabled_ && !InForkedChild()) {
    // A long first step (compiling) or a checkpoint between steps must not read as a silent
    // owner to a claimer in another PID namespace.
    slot_->heartbeat_ns.store(t, std::memory_order_relaxed);
    if (shm::PollControl(*slot_, &control_seq_, &control_)) {
      ++stats_.control_updates;
      OnSelfTestRequest();
    }
  }
  // A forked child's copy neither starts nor ends the parent's captures.
  if (capture_handler_ && enabled_ && !InForkedChild()) CaptureAtBeginStep(step);
  selftest_injected_ = false;
  selftest_pending_ =
      enabled_ && !InForkedChild() && step >= selftest_.first_step && step <= selftest_.last_step;
  recorder_.Begin(t);
  PublishOpen(t, shm::OpenCode(0));
}

void Client::EndStep() noexcept {
  if (!recorder_.in_step()) {
    ++stats_.misuse;
    return;
  }
  const int64_t t = shm::MonotonicNowNs();
  uint32_t flags = recorder_.Finish(t, boundaries_);
  if (capture_running_ && !InForkedChild()) {
    capture_running_through_ = current_step_;
    if (current_step_ >= capture_running_last_) EndCallbackCapture();
  }
  if (enabled_ && segment_->lost()) {
    // Someone truncated the segment file: our pages are private zeros now (mapping_guard.h).
    Disable(absl::StrCat("segment ", segment_->path(), " was truncated while in use"),
            /*quiet=*/false);
  }
  if (enabled_ && !InForkedChild()) {
    // Another process took the slot over (it judged this one silent): two writers on one
    // ring would corrupt both; the slot is theirs.
    const uint32_t owner = slot_->owner_pid.load(std::memory_order_relaxed);
    if (owner != owner_pid_) {
      Disable(absl::StrCat("local rank ", identity_.local_rank, "'s slot was taken over by pid ",
                           owner),
              /*quiet=*/false);
    }
  }
  if (!enabled_ || InForkedChild()) {
    ++stats_.steps_not_recorded;
    return;
  }
  PublishOpen(t, shm::kOpenBetweenSteps);
  slot_->heartbeat_ns.store(t, std::memory_order_relaxed);
  if (control_.paused) {
    ++stats_.steps_paused;
    return;
  }
  if (!control_.Samples(current_step_)) {
    ++stats_.steps_sampled_out;
    return;
  }
  // The step after a capture window too: the profiler's stop and export (stagefrontier.torch)
  // or the end callback run after the window's last step ended, so they land in that step.
  if (control_.CapturesTrace(current_step_) ||
      (current_step_ > INT64_MIN && control_.CapturesTrace(current_step_ - 1))) {
    flags |= shm::v1::kRecordTraceCaptured;
  }
  if (selftest_injected_) flags |= shm::v1::kRecordSelfTestDelay;
  // What the sidecar would refuse is not published (it would be counted invalid there).
  if (shm::CheckStepRecord(current_step_, boundaries_, recorder_.stage_count(), t) !=
      shm::RecordProblem::kNone) {
    ++stats_.steps_invalid;
    return;
  }
  if (writer_.TryPublish(current_step_, t, flags, boundaries_, recorder_.stage_count())) {
    ++stats_.steps_recorded;
  } else {
    ++stats_.steps_dropped_full;
  }
}

void Client::OnSelfTestRequest() noexcept {
  const shm::ControlRequest& c = control_;
  if (!c.HasSelfTest()) return;
  const SelfTestPlan asked = {c.selftest_stage, int64_t{c.selftest_delay_us} * 1000,
                              c.selftest_first_step, c.selftest_last_step};
  // Later control requests (pause, sampling) repeat the self-test fields: answer once.
  if (asked == selftest_seen_) return;
  selftest_seen_ = asked;
  shm::v1::SelfTestState answer = shm::v1::kSelfTestAccepted;
  if (!allow_selftest_) {
    answer = shm::v1::kSelfTestNotAllowed;
  } else if (c.selftest_stage >= schema_.size() || c.selftest_delay_us > kMaxSelfTestDelayUs ||
             // Step numbers in range first: the sidecar's bytes, whose difference could
             // overflow past the cap.
             !shm::ValidStepNumber(c.selftest_first_step) ||
             !shm::ValidStepNumber(c.selftest_last_step) ||
             c.selftest_last_step - c.selftest_first_step >= kMaxSelfTestSteps) {
    answer = shm::v1::kSelfTestBadRequest;
  }
  if (answer == shm::v1::kSelfTestAccepted) {
    selftest_ = asked;
  } else {
    ++stats_.selftest_refused;
  }
  shm::AnswerSelfTest(*slot_, c.selftest_first_step, answer);
}

int64_t Client::InjectSelfTestDelay() noexcept {
  selftest_pending_ = false;
  // A real delay, as a slow stage would cost: sleep to an absolute deadline (EINTR-safe).
  timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  const int64_t end_ns = deadline.tv_sec * 1'000'000'000LL + deadline.tv_nsec + selftest_.delay_ns;
  deadline.tv_sec = end_ns / 1'000'000'000LL;
  deadline.tv_nsec = end_ns % 1'000'000'000LL;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr) == EINTR) {
  }
  selftest_injected_ = true;
  ++stats_.selftest_steps;
  if (enabled_) shm::CountSelfTestStep(*slot_);
  return selftest_.delay_ns;
}

void Client::SetCaptureCallbacks(const CaptureCallbacks& callbacks) noexcept {
  if (capture_running_) EndCallbackCapture();
  capture_callbacks_ = callbacks;
  if (callbacks.begin != nullptr) DeclareCaptureHandler();
}

void Client::DeclareCaptureHandler() noexcept {
  capture_handler_ = true;
  // Told to the coordinator (through the sidecar's health reports), which asks captures only
  // of ranks that can take them.
  if (enabled_ && !InForkedChild()) slot_->capture_handler.store(1, std::memory_order_release);
}

void Client::AnswerCapture(int64_t request_first_step, shm::v1::CaptureState state,
                           shm::v1::CaptureFailure failure, uint64_t bytes) noexcept {
  switch (state) {
    case shm::v1::kCaptureRunning:
      ++stats_.captures_begun;
      break;
    case shm::v1::kCaptureDone:
      ++stats_.captures_done;
      break;
    case shm::v1::kCaptureFailed:
      ++stats_.captures_failed;
      break;
    default:
      break;
  }
  if (enabled_ && !InForkedChild()) {
    shm::AnswerCapture(*slot_, request_first_step, state, failure, bytes);
  }
}

template <typename Call>
bool Client::CallCaptureCallback(Call&& call) noexcept {
  // The callback is the trainer's code: nothing it throws may unwind through the stub.
  try {
    return call() == 0;
  } catch (...) {
    return false;
  }
}

void Client::CaptureAtBeginStep(int64_t step) noexcept {
  const shm::ControlRequest& c = control_;
  // A running capture whose window this step left (done, or the request withdrawn) ends.
  if (capture_running_ && !c.CapturesTrace(step)) EndCallbackCapture();
  const bool has_window = c.trace_last_step >= c.trace_first_step;
  if (!has_window ||
      (c.trace_first_step == capture_seen_first_ && c.trace_last_step == capture_seen_last_)) {
    return;  // nothing asked, or this window was handled already
  }
  if (step < c.trace_first_step) return;  // not yet
  capture_seen_first_ = c.trace_first_step;
  capture_seen_last_ = c.trace_last_step;
  if (c.trace_last_step < step) {
    // Asked too late: every requested step is past (the request travelled slower than the
    // lead the coordinator allowed). Said once, so that the coordinator stops waiting.
    AnswerCapture(c.trace_first_step, shm::v1::kCaptureFailed, shm::v1::kCaptureMissed);
    return;
  }
  // The first step of the window this trainer runs. Without callbacks the trainer's own
  // handler (stagefrontier.torch) starts its profiler and answers.
  if (capture_callbacks_.begin == nullptr) return;
  // A window that replaced a running one and covers this step too: the running one ends
  // first (answered with what it captured), never two begins in a row.
  if (capture_running_) EndCallbackCapture();
  void* user = capture_callbacks_.user;
  auto* begin = capture_callbacks_.begin;
  if (!CallCaptureCallback([&] { return begin(user, step, c.trace_last_step); })) {
    AnswerCapture(c.trace_first_step, shm::v1::kCaptureFailed, shm::v1::kCaptureCallbackFailed);
    return;
  }
  capture_running_ = true;
  capture_running_first_ = c.trace_first_step;
  capture_running_last_ = c.trace_last_step;
  capture_running_start_ = step;
  capture_running_through_ = step - 1;
  AnswerCapture(c.trace_first_step, shm::v1::kCaptureRunning);
}

void Client::EndCallbackCapture() noexcept {
  capture_running_ = false;
  uint64_t bytes = 0;
  auto* end = capture_callbacks_.end;
  void* user = capture_callbacks_.user;
  const int64_t first = capture_running_first_;
  const int64_t start = capture_running_start_;
  const int64_t last = capture_running_through_;
  if (end != nullptr && !CallCaptureCallback([&] { return end(user, start, last, &bytes); })) {
    AnswerCapture(first, shm::v1::kCaptureFailed, shm::v1::kCaptureCallbackFailed);
    return;
  }
  AnswerCapture(first, shm::v1::kCaptureDone, shm::v1::kCaptureFailureNone, bytes);
}

Client::StageId Client::stage_id(const std::string& name) const {
  const std::optional<size_t> k = schema_.Find(name);
  return k ? static_cast<StageId>(*k) : kNoStage;
}

ClientStats Client::stats() const noexcept {
  ClientStats s = stats_;
  s.misuse += recorder_.misuse();
  if (hang_dumper_ != nullptr) {
    const HangDumpStats d = hang_dumper_->stats();
    s.dumps_written = d.dumps_written;
    s.dumps_unrequested = d.dumps_unrequested;
    s.dump_errors = d.dump_errors;
  }
  return s;
}

absl::Status Client::EnableHangDumps(HangDumpOptions options) {
  if (!enabled_ || InForkedChild()) {
    return absl::FailedPreconditionError(
        absl::StrCat("hang dumps need a recording client: ",
                     InForkedChild() ? std::string("this is a forked child") : disabled_reason_));
  }
  if (hang_dumper_ != nullptr) return absl::AlreadyExistsError("hang dumps are enabled already");
  try {
    HangDumper::Context context;
    context.slot = slot_;
    context.rank = identity_.rank;
    context.job = identity_.job_id;
    context.directory =
        options.directory.empty() ? DefaultCaptureDirectory(identity_.shm_dir) : options.directory;
    for (const Stage& s : schema_.stages()) context.stage_names.push_back(s.name);
    absl::StatusOr<std::unique_ptr<HangDumper>> d =
        HangDumper::Create(std::move(options), std::move(context));
    if (!d.ok()) return d.status();
    hang_dumper_ = *std::move(d);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("hang dumps: ", e.what()));
  }
}

absl::Status Client::PublishHangDumps() {
  if (hang_dumper_ == nullptr || InForkedChild()) {
    return absl::FailedPreconditionError("hang dumps are not enabled");
  }
  return hang_dumper_->Publish();
}

absl::Status Client::UnpublishHangDumps() {
  if (hang_dumper_ == nullptr || InForkedChild()) {
    return absl::FailedPreconditionError("hang dumps are not enabled");
  }
  return hang_dumper_->Unpublish();
}

int Client::hang_dump_signal_fd() const {
  return hang_dumper_ != nullptr ? hang_dumper_->signal_fd() : -1;
}

HangDumpWait Client::WaitForHangDump(std::chrono::milliseconds timeout, uint64_t after) {
  return hang_dumper_ != nullptr ? hang_dumper_->WaitForDump(timeout, after) : HangDumpWait{};
}

}  // namespace stagefrontier
