#include "daemon/coordinator/ingest_stream.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/log_safe.h"
#include "daemon/common/utf8_prefix.h"
#include "daemon/coordinator/resource_limits.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "shm/monotonic_clock.h"

namespace stagefrontier {
namespace {

// Storage errors of the data directory (a full disk): nothing was kept, so the batch must not
// be acknowledged; the sidecar sends it again after its backoff.
bool StorageUnavailable(const absl::Status& s) { return absl::IsUnavailable(s); }

// Health of slots whose job is not declared yet: a sidecar reports at most its node's slots
// (a few dozen); job ids are at most 63 characters (shm/record_limits.h).
constexpr size_t kMaxEarlyHealth = 4096;
constexpr size_t kMaxEarlyHealthJobChars = 63;

}  // namespace

IngestStream::IngestStream(const IngestDeps& deps, grpc::CallbackServerContext* context,
                           uint64_t id, int64_t created_ns, std::function<void(uint64_t)> on_done)
    : deps_(deps),
      context_(context),
      id_(id),
      created_ns_(created_ns),
      on_done_(std::move(on_done)) {}

std::string IngestStream::Who() const {
  return node_.empty() ? LogSafe(context_->peer()) : LogSafe(node_);
}

void IngestStream::Start() {
  if (!TokenMatches(*context_, deps_.token)) {
    deps_.metrics->unauthenticated().Increment();
    End(grpc::UNAUTHENTICATED, "missing or wrong token (authorization: Bearer ...)");
    return;
  }
  StartRead(&read_buf_);
}

void IngestStream::End(grpc::StatusCode code, const std::string& message, const char* cut_reason,
                       bool cancel) {
  {
    MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
    queue_.clear();
  }
  if (code != grpc::OK && code != grpc::CANCELLED) {
    const auto status_code = static_cast<absl::StatusCode>(code);  // the same numbering
    deps_.metrics->stream_errors(status_code).Increment();
    if (cut_reason != nullptr) deps_.metrics->streams_cut(cut_reason).Increment();
    if (deps_.log) {
      deps_.log(absl::StrCat("ingest stream from ", Who(),
                             " ended: ", absl::StatusCodeToString(status_code), ": ", message));
    }
  }
  if (cancel) context_->TryCancel();  // a write stuck behind flow control completes now
  Finish(grpc::Status(code, message));
}

bool IngestStream::Send(const v1::CoordinatorMessage& message) {
  grpc::ByteBuffer buf;
  bool own = false;
  if (!grpc::SerializationTraits<v1::CoordinatorMessage>::Serialize(message, &buf, &own).ok()) {
    return false;
  }
  {
    MutexLock lock(&mu_);
    if (finished_) return false;
    if (static_cast<int32_t>(queue_.size()) < deps_.limits.max_stream_queue) {
      queue_.push_back(std::move(buf));
      buf.Clear();
    }
  }
  if (buf.Valid()) {
    // The sidecar does not read what it is sent: cut it off rather than let it hold memory,
    // or hold up anything else (acks of every other stream go out regardless).
    End(grpc::RESOURCE_EXHAUSTED,
        absl::StrCat(
            "the stream does not read its acknowledgements: ", deps_.limits.max_stream_queue,
            " messages were waiting for it (--max-stream-queue); reconnect"),
        "slow_reader", /*cancel=*/true);
    return false;
  }
  MaybeWrite();
  return true;
}

void IngestStream::MaybeWrite() {
  {
    MutexLock lock(&mu_);
    if (writing_ || finished_ || queue_.empty()) return;
    writing_ = true;
    writing_buf_ = std::move(queue_.front());
    queue_.pop_front();
  }
  StartWrite(&writing_buf_);
}

void IngestStream::OnWriteDone(bool ok) {
  {
    MutexLock lock(&mu_);
    writing_ = false;
    writing_buf_.Clear();
  }
  if (!ok) {
    End(grpc::CANCELLED, "the stream broke while writing");
    return;
  }
  MaybeWrite();
}

bool IngestStream::CheckHelloDeadline(int64_t now_ns) {
  if (hello_.load(std::memory_order_acquire)) return true;
  if (now_ns - created_ns_ < deps_.limits.hello_timeout_ms * 1'000'000) return false;
  End(grpc::DEADLINE_EXCEEDED,
      absl::StrCat("no Hello within ", deps_.limits.hello_timeout_ms,
                   " ms of opening the stream (--hello-timeout-ms)"),
      "hello_timeout");
  return true;
}

void IngestStream::CheckIdle(int64_t now_ns) {
  const int64_t limit_ms = deps_.limits.idle_timeout_ms;
  // Before its Hello a stream is the Hello deadline's; after it, session_ is set for good and
  // its last_seen_ns is when the stream last delivered a message.
  if (limit_ms <= 0 || !hello_.load(std::memory_order_acquire)) return;
  const int64_t seen = session_->last_seen_ns.load(std::memory_order_relaxed);
  if (now_ns - seen < limit_ms * 1'000'000) return;
  End(grpc::DEADLINE_EXCEEDED,
      absl::StrCat("nothing received for ", limit_ms, " ms (--idle-timeout-ms)"), "idle");
}

void IngestStream::OnCancel() { End(grpc::CANCELLED, "cancelled"); }

void IngestStream::OnDone() {
  // Every operation is done: declared_ is ours. Ranks this stream last reported are lost now.
  for (const auto& [key, d] : declared_) {
    if (d.job != nullptr) d.job->SidecarStreamEnded(key.second, id_);
  }
  if (session_ != nullptr) {
    deps_.sessions->Remove(session_);  // waits for a Send in progress
    deps_.metrics->sidecar_streams().Decrement();
    if (deps_.log) deps_.log(absl::StrCat("sidecar ", Who(), " disconnected"));
  }
  on_done_(id_);
  delete this;
}

void IngestStream::OnReadDone(bool ok) {
  if (!ok) {
    End(grpc::OK, "");  // the sidecar closed its side, or the stream broke
    return;
  }
  ++messages_read_;
  if (session_ != nullptr) SidecarSessions::Touch(*session_, shm::MonotonicNowNs());
  const size_t bytes = read_buf_.Length();
  v1::SidecarMessage msg;
  if (!grpc::SerializationTraits<v1::SidecarMessage>::Deserialize(&read_buf_, &msg).ok()) {
    End(grpc::INVALID_ARGUMENT,
        absl::StrCat("message ", messages_read_, " (", bytes,
                     " bytes) is not a stagefrontier.v1.SidecarMessage"),
        "malformed_message");
    return;
  }
  bool go_on = true;
  if (!hello_.load(std::memory_order_relaxed)) {
    if (!msg.has_hello()) {
      End(grpc::FAILED_PRECONDITION, "the first message of an ingest stream must be Hello");
      return;
    }
    go_on = OnHello(msg.hello());
  } else if (msg.has_batch()) {
    go_on = OnBatch(msg.batch());
  } else if (msg.has_health()) {
    OnHealth(msg.health());
  } else if (msg.has_control_ack()) {
    OnControlAck(msg.control_ack());
  } else {
    End(grpc::INVALID_ARGUMENT, "an empty or unknown ingest message");
    return;
  }
  if (go_on) StartRead(&read_buf_);
}

bool IngestStream::OnHello(const v1::Hello& hello) {
  if (hello.protocol_version() != v1::PROTOCOL_VERSION_1) {
    End(grpc::FAILED_PRECONDITION,
        absl::StrCat("protocol version ", hello.protocol_version(),
                     " is not supported; this coordinator speaks version 1"));
    return false;
  }
  node_ = Utf8Prefix(hello.node(), 256);
  // "ipv4:10.0.0.5:41234" -> "10.0.0.5" ("ipv6:[::1]:41234" -> "[::1]").
  std::string address = context_->peer();
  if (const size_t colon = address.find(':'); colon != std::string::npos) {
    address = address.substr(colon + 1);
  }
  if (const size_t port = address.rfind(':'); port != std::string::npos) {
    address = address.substr(0, port);
  }
  // With client certificates, a node is who its certificate says.
  const std::vector<grpc::string_ref> cn =
      context_->auth_context()->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
  if (!cn.empty() && std::string(cn.front().data(), cn.front().size()) != node_) {
    deps_.metrics->node_identity_conflicts().Increment();
    End(grpc::PERMISSION_DENIED,
        absl::StrCat("node name \"", LogSafe(node_), "\" is not the client certificate's (CN \"",
                     LogSafe(std::string(cn.front().data(), cn.front().size())), "\")"));
    return false;
  }
  absl::StatusOr<std::shared_ptr<SidecarSessions::Session>> session = deps_.sessions->Add(
      node_, Utf8Prefix(hello.sidecar_id(), 256), address, this, shm::MonotonicNowNs());
  if (!session.ok()) {
    deps_.metrics->node_identity_conflicts().Increment();
    if (deps_.log) deps_.log(std::string(session.status().message()));
    End(grpc::ALREADY_EXISTS, std::string(session.status().message()));
    return false;
  }
  if (deps_.nodes != nullptr) {
    deps_.nodes->NoteHost(node_, hello.host(), address, shm::RealtimeNowNs());
  }
  session_ = *std::move(session);
  hello_.store(true, std::memory_order_release);
  deps_.metrics->sidecar_streams().Increment();
  if (deps_.log) {
    deps_.log(absl::StrCat("sidecar ", Who(), " (", LogSafe(hello.sidecar_id()), ") connected"));
  }
  // Before any ack: a sidecar that gets an ack first knows this coordinator predates the
  // message and keeps to the old 3 s limit's cadence (health_cadence.h).
  v1::CoordinatorMessage limits;
  constexpr int64_t kMs = 1'000'000;
  v1::StreamLimits* l = limits.mutable_limits();
  l->set_silent_after_ms(deps_.terms.silent_after_ns / kMs);
  l->set_idle_timeout_ms(std::max<int64_t>(deps_.limits.idle_timeout_ms, 0));
  l->set_step_deadline_ms(deps_.terms.step_deadline_ns / kMs);
  l->set_stall_after_ms(deps_.terms.stall_after_ns / kMs);
  l->set_window_steps(deps_.terms.window_steps);
  l->set_batch_health(true);
  return Send(limits);
}

void IngestStream::Reject(v1::BatchAck* ack, const std::string& job, int32_t rank,
                          const absl::Status& s, uint32_t records) {
  v1::Rejection* r = ack->add_rejections();
  r->set_job(Utf8Prefix(job, 128));
  r->set_rank(rank);
  r->set_code(static_cast<int32_t>(s.code()));
  r->set_message(std::string(s.message()));
  r->set_records(records);
  deps_.metrics->rejections(s.code()).Increment();
}

void IngestStream::KeepRefusal(const std::pair<std::string, int32_t>& key, Declared refused) {
  // A refusal is kept (so that the rank's steps are refused with its reason) for this many
  // (job, rank) pairs at most: a trainer that keeps declaring new ranks or job names must not
  // grow the stream without bound. Past it, their steps read "not declared on this stream".
  constexpr size_t kMaxRefusalsKept = 4096;
  auto it = declared_.find(key);
  if (it == declared_.end()) {
    if (refusals_kept_ >= kMaxRefusalsKept) return;
    ++refusals_kept_;
    declared_.emplace(key, std::move(refused));
    return;
  }
  if (it->second.status.ok()) ++refusals_kept_;  // an accepted rank, now refused
  it->second = std::move(refused);
}

bool IngestStream::RoomForJob(const std::string& job) {
  const auto full = [&] {
    return declared_jobs_.count(job) == 0 &&
           static_cast<int32_t>(declared_jobs_.size()) >= deps_.limits.max_jobs_per_stream;
  };
  if (full()) ForgetIdleJobs(shm::MonotonicNowNs());
  return !full();
}

void IngestStream::Accept(const std::pair<std::string, int32_t>& key,
                          const std::shared_ptr<JobState>& job, const v1::RankDeclaration& d,
                          std::vector<v1::ControlRequest>* to_send) {
  declared_jobs_.insert(d.job());
  job->NoteOwner(d, node_);
  if (auto old = declared_.find(key); old != declared_.end() && !old->second.status.ok()) {
    --refusals_kept_;
  }
  declared_[key] = {job, absl::OkStatus(), nullptr, d};
  if (auto early = early_health_.find(key); early != early_health_.end()) {
    job->UpdateStubHealth(early->second, node_, id_);
    early_health_.erase(early);
  }
  if (deps_.sessions->Bind(session_, d.job(), d.rank())) {
    v1::ControlRequest c = job->JobControl();
    if (c.paused() || c.sample_every() > 1) to_send->push_back(std::move(c));
  }
}

bool IngestStream::OnDeclaration(const v1::RankDeclaration& d, v1::BatchAck* ack,
                                 std::vector<v1::ControlRequest>* to_send, bool again) {
  const auto key = std::make_pair(d.job(), d.rank());
  if (!RoomForJob(d.job())) {
    const absl::Status s = NoRoom(absl::StrCat(
        "job \"", LogSafe(d.job()), "\" refused: this stream already declared ranks of ",
        declared_jobs_.size(), " jobs (--max-jobs-per-stream)"));
    KeepRefusal(key, {nullptr, s, nullptr, d});
    Reject(ack, d.job(), d.rank(), s, 0);
    return true;
  }
  absl::StatusOr<std::shared_ptr<JobState>> job = deps_.jobs->Declare(d);
  if (job.ok()) {
    Accept(key, *job, d, to_send);
    return true;
  }
  if (StorageUnavailable(job.status())) {
    // Not acknowledged: the sidecar keeps the records and sends them again.
    End(grpc::UNAVAILABLE, absl::StrCat("cannot persist job ", LogSafe(d.job()),
                                        " now: ", job.status().message(), "; send again later"));
    return false;
  }
  std::shared_ptr<JobState> existing = deps_.jobs->Find(d.job());
  KeepRefusal(key, {nullptr, job.status(), existing, d});
  Reject(ack, d.job(), d.rank(), job.status(), 0);
  if (existing != nullptr) existing->NoteRefused(d.rank(), node_, job.status().message(), 0);
  if (deps_.log && !again) {
    deps_.log(absl::StrCat("sidecar ", Who(), ": ", job.status().message()));
  }
  return true;
}

std::optional<absl::StatusOr<IngestCounts>> IngestStream::FollowNewRun(Declared& d,
                                                                       const v1::RankSteps& rs,
                                                                       const IngestCounts& c,
                                                                       int64_t now) {
  // The rank's new process went back to an earlier step: a re-run of the job id.
  const std::string why = absl::StrCat("rank ", rs.rank(), " came back as a new process at step ",
                                       c.new_run_step, " after step ", c.previous_step);
  absl::StatusOr<std::shared_ptr<JobState>> next =
      deps_.jobs->StartGeneration(d.job, d.declaration, node_, why);
  if (!next.ok() && StorageUnavailable(next.status())) {
    End(grpc::UNAVAILABLE, absl::StrCat("cannot persist the new run of job ", LogSafe(rs.job()),
                                        " now: ", next.status().message(), "; send again later"));
    return std::nullopt;
  }
  if (!next.ok()) return next.status();
  d.job = *next;
  return d.job->Ingest(rs, node_, now, id_);
}

bool IngestStream::DeclareAgain(const std::pair<std::string, int32_t>& key, int64_t now_ns,
                                std::vector<v1::ControlRequest>* to_send, bool* ended) {
  if (again_batch_ != static_cast<int64_t>(messages_read_)) {
    if (now_ns < next_again_ns_) return false;
    next_again_ns_ = now_ns + 1'000'000'000;
    again_batch_ = static_cast<int64_t>(messages_read_);
  }
  auto it = declared_.find(key);
  if (it == declared_.end() || !IsNoRoom(it->second.status)) return false;
  const v1::RankDeclaration d = it->second.declaration;
  v1::BatchAck scratch;  // the steps' refusal goes in the real ack
  if (!OnDeclaration(d, &scratch, to_send, /*again=*/true)) {
    *ended = true;
    return false;
  }
  it = declared_.find(key);
  return it != declared_.end() && it->second.status.ok();
}

bool IngestStream::OnBatch(const v1::StepBatch& batch) {
  deps_.metrics->ingest_batches().Increment();
  v1::CoordinatorMessage message;
  BatchReply reply;
  reply.ack = message.mutable_ack();
  reply.ack->set_batch_seq(batch.batch_seq());
  // Health riding the batch is taken as if it came right before it: a new rank's (whether its
  // trainer can capture) is held until the declaration below, as a Health message's is.
  if (batch.has_health()) OnHealth(batch.health());
  for (const v1::RankDeclaration& d : batch.declarations()) {
    if (!OnDeclaration(d, reply.ack, &reply.to_send)) return false;
  }
  const int64_t now = shm::MonotonicNowNs();
  for (const v1::RankSteps& rs : batch.steps()) {
    if (!OnRankSteps(rs, now, &reply)) return false;
  }
  // Account what is complete now; acknowledge once durable (group commit, off this thread).
  for (const auto& job : reply.touched_jobs) job->CloseDue(now);
  deps_.acker->Enqueue(session_, std::move(message), std::move(reply.touched_jobs));
  for (const v1::ControlRequest& c : reply.to_send) {
    v1::CoordinatorMessage m;
    *m.mutable_control() = c;
    if (!Send(m)) return false;
  }
  return true;
}

bool IngestStream::OnRankSteps(const v1::RankSteps& rs, int64_t now, BatchReply* reply) {
  v1::BatchAck* ack = reply->ack;
  auto it = declared_.find({rs.job(), rs.rank()});
  if (it == declared_.end()) {
    Reject(ack, rs.job(), rs.rank(),
           absl::FailedPreconditionError(absl::StrCat(
               "job ", LogSafe(rs.job()), " rank ", rs.rank(), " was not declared on this stream")),
           rs.count());
    return true;
  }
  if (IsNoRoom(it->second.status)) {
    bool ended = false;
    const auto key = it->first;
    DeclareAgain(key, now, &reply->to_send, &ended);
    if (ended) return false;
    it = declared_.find(key);  // still there: refusals and their jobs' entries stay
  }
  if (!it->second.status.ok()) {
    Reject(ack, rs.job(), rs.rank(), it->second.status, rs.count());
    if (it->second.refused_by != nullptr) {
      it->second.refused_by->NoteRefused(rs.rank(), node_, it->second.status.message(), rs.count());
    }
    return true;
  }
  absl::StatusOr<IngestCounts> c = it->second.job->Ingest(rs, node_, now, id_);
  if (c.ok() && c->new_run) {
    std::optional<absl::StatusOr<IngestCounts>> next = FollowNewRun(it->second, rs, *c, now);
    if (!next) return false;
    c = *std::move(next);
  }
  if (!c.ok()) {
    // Malformed records of one rank are refused in the ack and dropped by the sidecar; the
    // stream goes on (ending it made the sidecar re-send the same batch forever).
    Reject(ack, rs.job(), rs.rank(), c.status(), rs.count());
    return true;
  }
  if (c->far_ahead > 0) {
    Reject(ack, rs.job(), rs.rank(),
           absl::OutOfRangeError(absl::StrCat(
               "job ", rs.job(), " rank ", rs.rank(), ": ", c->far_ahead, " records from step ",
               c->far_ahead_step, " lie implausibly far ahead of the job (at step ", c->job_step,
               "): refused as corrupt step numbers")),
           c->far_ahead);
  }
  if (c->selftest_marked > 0 && deps_.self_tests != nullptr) {
    deps_.self_tests->OnMarkedSteps(rs.job(), rs.rank(), c->selftest_marked);
  }
  ack->set_accepted(ack->accepted() + c->accepted);
  ack->set_duplicates(ack->duplicates() + c->duplicates);
  ack->set_late(ack->late() + c->late);
  if (reply->touched.insert(it->second.job.get()).second) {
    reply->touched_jobs.push_back(it->second.job);
  }
  return true;
}

void IngestStream::ForgetIdleJobs(int64_t now_ns) {
  const int64_t idle_ns = deps_.limits.job_retire_idle_ms * 1'000'000;
  for (auto j = declared_jobs_.begin(); j != declared_jobs_.end();) {
    const auto first = declared_.lower_bound({*j, INT32_MIN});
    auto last = first;
    bool idle = true;
    for (; last != declared_.end() && last->first.first == *j; ++last) {
      // Each rank's entry holds the generation its steps go to.
      if (last->second.job != nullptr && !last->second.job->IdleFor(now_ns, idle_ns)) idle = false;
    }
    if (!idle) {
      ++j;
      continue;
    }
    for (auto e = first; e != last; ++e) {
      if (!e->second.status.ok()) --refusals_kept_;
    }
    declared_.erase(first, last);
    deps_.sessions->Forget(session_, *j);
    j = declared_jobs_.erase(j);
  }
}

void IngestStream::OnHealth(const v1::Health& health) {
  deps_.metrics->ingest_health_reports().Increment();
  for (const v1::SlotHealth& h : health.slots()) {
    auto job = deps_.jobs->Find(h.job());
    if (job == nullptr) {
      // Kept only while plausible: a short name, room left (hostile streams stay bounded).
      const auto key = std::make_pair(h.job(), h.rank());
      if (h.job().size() <= kMaxEarlyHealthJobChars &&
          (early_health_.size() < kMaxEarlyHealth || early_health_.count(key) != 0)) {
        early_health_[key] = h;
      }
      continue;
    }
    job->UpdateStubHealth(h, node_, id_);
    if (deps_.self_tests != nullptr) deps_.self_tests->OnStubAnswer(h.job(), h);
    if (deps_.capture_answers != nullptr && h.capture_state() != 0) {
      deps_.capture_answers->OnCaptureAnswer(h.job(), h);
    }
  }
  // A sidecar sends health at least every 30 s (health_cadence.h).
  if (const int64_t now = shm::MonotonicNowNs(); now >= next_forget_ns_) {
    next_forget_ns_ = now + 10'000'000'000;
    ForgetIdleJobs(now);
  }
}

void IngestStream::OnControlAck(const v1::ControlAck& a) {
  if (deps_.capture_answers != nullptr) deps_.capture_answers->OnControlAck(a);
  if (!a.applied() && deps_.log) {
    deps_.log(absl::StrCat("sidecar ", Who(), " could not apply control request ", a.request_id(),
                           " for job ", LogSafe(a.job()), ": ", LogSafe(a.error())));
  }
}

}  // namespace stagefrontier
