#include "daemon/sidecar/ingest_streamer.h"

#include <unistd.h>

#include <random>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/host_name.h"
#include "daemon/common/log_safe.h"
#include "daemon/sidecar/coordinator_channel.h"

namespace stagefrontier {
namespace {

int64_t Ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// "<node>/<pid>/<64 random bits>", one per sidecar process (all its lanes share it): the
// coordinator binds a node name to it while it is connected, so the random part keeps another
// process from passing for this one.
std::string SidecarId(const std::string& node) {
  static const uint64_t nonce = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return absl::StrCat(node, "/", ::getpid(), "/", absl::Hex(nonce, absl::kZeroPad16));
}

}  // namespace

IngestStreamer::IngestStreamer(StreamerOptions options, SegmentDrainer* drainer, Log log, Log warn)
    : options_(std::move(options)),
      host_(HostName()),
      drainer_(drainer),
      log_(std::move(log)),
      warn_(warn ? std::move(warn) : log_),
      hold_(HoldFor(options_.batch_hold, nullptr)) {}

void IngestStreamer::Stop() {
  stop_ = true;
  cv_.notify_all();
}

void IngestStreamer::Run() {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      ChannelCredentials(options_.tls);
  if (!creds.ok()) {
    if (log_) log_(std::string(creds.status().message()));
    return;
  }
  CoordinatorChannelOptions channel_options;
  channel_options.target = options_.coordinator;
  channel_options.connect_timeout = options_.connect_timeout;
  CoordinatorConnection connection(channel_options, *creds);
  auto backoff = options_.backoff_min;
  batch_limit_ = options_.max_batch_records;
  while (!stop_) {
    const StreamOutcome outcome = RunStream(connection.Channel());
    if (stop_) break;
    OnStreamEnded(outcome);
    backoff = Backoff(backoff, outcome.progressed);
  }
}

std::chrono::milliseconds IngestStreamer::Backoff(std::chrono::milliseconds backoff,
                                                  bool progressed) {
  if (progressed) backoff = options_.backoff_min;
  ++counters_.reconnects;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, backoff, [&] { return stop_.load(); });
  return std::min(backoff * 2, options_.backoff_max);
}

void IngestStreamer::OnStreamEnded(const StreamOutcome& o) {
  const grpc::StatusCode code = o.status.error_code();
  const bool batch_refused =
      code == grpc::INVALID_ARGUMENT ||
      (code == grpc::RESOURCE_EXHAUSTED &&
       o.status.error_message().find("larger than max") != std::string::npos);
  if (!batch_refused || o.progressed || o.first_unacked.empty()) return;
  if (batch_limit_ > 1) {
    batch_limit_ = std::max<size_t>(1, batch_limit_ / 2);
    if (log_) {
      log_(absl::StrCat("the coordinator refused a batch (", o.status.error_message(),
                        "); sending at most ", batch_limit_, " records per batch"));
    }
    return;
  }
  // One record per batch and still refused: it will never be accepted. Drop it, say so.
  drainer_->Commit(o.first_unacked);
  counters_.records_dropped_poison += o.first_unacked_records;
  if (log_) {
    log_(absl::StrCat(
        "dropped ", o.first_unacked_records,
        " record(s) the coordinator refuses on every try: ", o.status.error_message()));
  }
}

IngestStreamer::StreamOutcome IngestStreamer::RunStream(std::shared_ptr<grpc::Channel> channel) {
  Connection c;
  if (OpenStream(c, std::move(channel))) {
    // Everything not acknowledged goes again on this stream.
    drainer_->Rewind();
    std::thread reader([this, &c] { ReadReplies(c); });
    SendLoop(c);
    if (!c.inflight.empty()) {
      c.outcome.first_unacked = c.inflight.front().commits;
      c.outcome.first_unacked_records = c.inflight.front().records;
    }
    CloseStream(c, reader);
  }
  c.outcome.status = c.stream->Finish();
  if (!stop_) WarnStreamEnded(c.outcome.status);
  return c.outcome;
}

bool IngestStreamer::OpenStream(Connection& c, std::shared_ptr<grpc::Channel> channel) {
  c.stub = v1::Ingest::NewStub(channel);
  AttachToken(&c.context, options_.token);
  c.stream = c.stub->Stream(&c.context);
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.clear();
    stream_broken_ = false;
  }
  v1::SidecarMessage hello;
  hello.mutable_hello()->set_protocol_version(v1::PROTOCOL_VERSION_1);
  hello.mutable_hello()->set_node(options_.node);
  hello.mutable_hello()->set_sidecar_id(SidecarId(options_.node));
  hello.mutable_hello()->set_host(host_);
  return c.stream->Write(hello);
}

void IngestStreamer::ReadReplies(Connection& c) {
  v1::CoordinatorMessage msg;
  while (c.stream->Read(&msg)) {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.push_back(msg);
    cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mu_);
  stream_broken_ = true;
  cv_.notify_all();
}

void IngestStreamer::SendLoop(Connection& c) {
  c.next_rescan = Clock::now();
  c.last_write = c.next_rescan;  // the Hello
  // Until the coordinator says its limits, the cadence an older coordinator needs.
  c.health = HealthCadence(CadenceFor(options_.health, nullptr));
  hold_.set_options(HoldFor(options_.batch_hold, nullptr));
  c.health.Start(Ns(c.next_rescan));
  c.poll = options_.poll_min;
  while (HandleInbox(c)) {
    const auto now = Clock::now();
    if (now >= c.next_rescan) {
      drainer_->Rescan();
      c.next_rescan = now + options_.rescan_every;
    }
    // A rank whose open stage just passed the threshold may be stuck: say so now, not at the
    // next regular report.
    bool open_passed = false;
    if (now >= c.next_open_check) {
      c.next_open_check = now + options_.open_stage_check;
      if (options_.open_stage_report.count() > 0) {
        open_passed = drainer_->OpenStagesPassed(
            std::chrono::duration_cast<std::chrono::nanoseconds>(options_.open_stage_report)
                .count(),
            0, &c.stage_open_long);
      }
      // News (an owner gone, a self-test answer, drops) goes without waiting for the quiet
      // cadence, which a node that sends batches never reaches. News already found waits for
      // its send (at most a second), which reads the slots again.
      if (!c.health_news) {
        v1::Health h;
        drainer_->FillHealth(&h);
        c.health_news = HealthNews(std::move(h)) != c.health_sent;
      }
    }
    // Before such a report what was drained goes out, so that the coordinator has every step the
    // ranks finished when it reads where they are now.
    if (open_passed) {
      DrainIntoPending(c, now);
      if (!SendPendingIfDue(c, now, /*force=*/true)) break;
    }
    // A stub's capture answer goes out at once (the next request's answer replaces it in the
    // slot, possibly before the regular report), but at most every 100 ms: a hostile slot can
    // change it at every poll.
    c.capture_news = drainer_->CaptureAnswersChanged() || c.capture_news;
    // (An open stage that just passed the threshold: its health may have ridden the batch
    // forced out above.)
    if ((c.health.Due(Ns(now), c.stage_open_long, c.health_news, c.capture_news) ||
         (open_passed && c.health.last_health_ns() != Ns(now))) &&
        !SendHealth(c, now)) {
      break;
    }
    const size_t n = DrainIntoPending(c, now);
    if (!SendPendingIfDue(c, now)) break;
    if (stop_ && StopIsDone(c, now, n)) break;
    c.poll = n > 0 ? options_.poll_min : std::min(c.poll * 2, options_.poll_max);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, c.poll, [&] { return !inbox_.empty() || stream_broken_; });
  }
}

bool IngestStreamer::HandleInbox(Connection& c) {
  std::deque<v1::CoordinatorMessage> got;
  bool broken = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    got.swap(inbox_);
    broken = stream_broken_;
  }
  bool ok = true;
  for (const v1::CoordinatorMessage& m : got) {
    if (m.has_limits()) {
      OnLimits(c, &m.limits());
    } else if (m.has_ack()) {
      if (!c.limits_known) OnLimits(c, nullptr);
      OnAck(c, m.ack());
    } else if (m.has_control()) {
      ok = OnControl(c, m.control());
    }
  }
  return !broken && ok;
}

void IngestStreamer::OnAck(Connection& c, const v1::BatchAck& ack) {
  while (!c.inflight.empty() && c.inflight.front().seq <= ack.batch_seq()) {
    drainer_->Commit(c.inflight.front().commits);
    c.unacked -= c.inflight.front().records;
    counters_.records_acked += c.inflight.front().records;
    c.inflight.pop_front();
  }
  c.outcome.progressed = true;
  // Acknowledged batches earn back their size.
  batch_limit_ = std::min(options_.max_batch_records, batch_limit_ * 2);
  for (const v1::Rejection& r : ack.rejections()) WarnRefused(r);
}

void IngestStreamer::OnLimits(Connection& c, const v1::StreamLimits* limits) {
  if (c.limits_known) return;  // said once per stream; a second is ignored
  c.limits_known = true;
  c.batch_health = limits != nullptr && limits->batch_health();
  const HealthCadenceOptions& want = options_.health;
  const HealthCadenceOptions got = CadenceFor(want, limits);
  c.health.set_options(got);
  hold_.set_options(HoldFor(options_.batch_hold, limits));
  if (!log_) return;
  constexpr int64_t kMs = 1'000'000;
  if (limits != nullptr && options_.batch_delay == StreamerOptions::kAutoBatching) {
    log_(DescribeHold(*limits, hold_.options()));
  }
  if (limits == nullptr) {
    log_(absl::StrCat(
        "the coordinator predates StreamLimits (its stall watch takes a sidecar "
        "silent for 3 s for lost): health after ",
        got.quiet_after_ns / kMs, " ms of silence, at least every ", got.max_gap_ns / kMs, " ms"));
  } else if (got.quiet_after_ns != want.quiet_after_ns ||
             got.stalled_every_ns != want.stalled_every_ns || got.max_gap_ns != want.max_gap_ns) {
    log_(absl::StrCat("the coordinator takes a sidecar silent for ", limits->silent_after_ms(),
                      " ms for lost and ends a stream idle for ", limits->idle_timeout_ms(),
                      " ms: health every ", got.stalled_every_ns / kMs, " ms in a stall, after ",
                      got.quiet_after_ns / kMs, " ms of silence, at least every ",
                      got.max_gap_ns / kMs, " ms (asked: ", want.stalled_every_ns / kMs, ", ",
                      want.quiet_after_ns / kMs, ", ", want.max_gap_ns / kMs, ")"));
  }
}

void IngestStreamer::WarnRefused(const v1::Rejection& r) {
  // Refused records are committed with the batch: dropped, counted, and said at once, then
  // once a minute with how many since (a rank refused for good refuses all).
  ++counters_.rejections;
  counters_.records_refused += r.records();
  const std::string what =
      absl::StrCat(" records of job ", LogSafe(r.job()), " rank ", r.rank(), " (",
                   absl::StatusCodeToString(static_cast<absl::StatusCode>(r.code())),
                   "): ", LogSafe(r.message(), 300));
  if (const std::optional<uint64_t> n = refusals_.Pass(what, r.records(), Clock::now());
      n && warn_) {
    warn_(absl::StrCat("coordinator refused ", *n, what,
                       r.records() == *n ? "" : " (since the last line, a minute ago)"));
  }
}

bool IngestStreamer::OnControl(Connection& c, const v1::ControlRequest& request) {
  v1::SidecarMessage reply;
  *reply.mutable_control_ack() = drainer_->ApplyControl(request);
  if (log_) {
    log_(absl::StrCat(
        "control request ", request.request_id(), " for job ", request.job(),
        reply.control_ack().applied() ? " applied" : ": " + reply.control_ack().error()));
  }
  return c.stream->Write(reply);
}

void IngestStreamer::TakeHealth(Connection& c, Clock::time_point now, v1::Health* out) {
  drainer_->FillHealth(out);
  c.health.Sent(Ns(now), /*health=*/true);
  c.health_sent = HealthNews(*out);
  c.health_news = false;
  c.capture_news = false;
}

bool IngestStreamer::SendHealth(Connection& c, Clock::time_point now) {
  v1::SidecarMessage h;
  // A node without ranks (between jobs) has nothing to report, but must not stay silent past
  // the coordinator's idle timeout (it would end the stream, log it and count it every
  // minute): an empty report at the max gap.
  const bool keepalive =
      now - c.last_write >= std::chrono::nanoseconds(c.health.options().max_gap_ns);
  TakeHealth(c, now, h.mutable_health());
  const bool write = h.health().slots_size() > 0 || keepalive;
  const bool ok = !write || c.stream->Write(h);
  if (write) {
    c.last_write = now;
    ++counters_.health_sent;
  }
  return ok;
}

int64_t IngestStreamer::NextBatchWithinNs() const {
  if (options_.batch_delay == StreamerOptions::kAutoBatching) return hold_.HoldNs();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(options_.batch_delay).count();
}

size_t IngestStreamer::DrainIntoPending(Connection& c, Clock::time_point now) {
  const size_t held = c.unacked + c.pending_n;
  if (held >= options_.max_unacked_records || c.pending_n >= batch_limit_) return 0;
  const int before = c.pending.batch().steps_size();
  const size_t n =
      drainer_->Drain(c.pending.mutable_batch(), &c.pending_f.commits,
                      std::min(batch_limit_ - c.pending_n, options_.max_unacked_records - held));
  if (n > 0 && c.pending_n == 0) c.pending_since = now;
  c.pending_n += n;
  if (options_.batch_delay == StreamerOptions::kAutoBatching) {
    const auto& steps = c.pending.batch().steps();
    for (int i = before; i < steps.size(); ++i) {
      const v1::RankSteps& rs = steps[i];
      if (rs.count() == 0) continue;
      hold_.Note(rs.job(), rs.rank(), rs.base_step() + rs.count() - 1, Ns(now));
    }
  }
  return n;
}

bool IngestStreamer::HoldIsOver(const Connection& c, Clock::time_point now) const {
  if (options_.batch_delay == StreamerOptions::kAutoBatching) {
    return hold_.Due(Ns(now), Ns(c.pending_since));
  }
  return now - c.pending_since >= options_.batch_delay;
}

bool IngestStreamer::SendPendingIfDue(Connection& c, Clock::time_point now, bool force) {
  const bool due = force || stop_ || c.pending_n >= batch_limit_ ||
                   c.unacked + c.pending_n >= options_.max_unacked_records || c.pending_n == 0 ||
                   HoldIsOver(c, now);
  if ((c.pending_n == 0 && c.pending_f.commits.empty()) || !due) return true;
  c.pending_f.seq = ++c.seq;
  c.pending_f.records = c.pending_n;
  c.pending.mutable_batch()->set_batch_seq(c.pending_f.seq);
  // Ranks the coordinator does not know until this batch: their health (whether their
  // trainer can capture) goes first, on the same ordered stream; the coordinator holds it
  // until the declaration and so has it when this very batch closes the job's first window.
  // Sent behind the batch, it came too late whenever the sidecar found a segment with a
  // window's steps already written ("cannot capture" on a capable rank).
  // To a coordinator that reads StepBatch.health, that health rides the batch, and so does
  // health that would come due before the next batch (a message fewer: issue 33).
  const bool declares = c.pending.batch().declarations_size() > 0;
  if (c.batch_health &&
      (declares || c.health.RidesBatch(Ns(now), NextBatchWithinNs(), c.stage_open_long,
                                       c.health_news, c.capture_news))) {
    v1::StepBatch* batch = c.pending.mutable_batch();
    TakeHealth(c, now, batch->mutable_health());
    if (batch->health().slots_size() > 0) {
      ++counters_.health_riding;
    } else {
      batch->clear_health();  // no slot claimed (a batch of commits only): nothing to say
    }
  } else if (declares && !SendHealth(c, now)) {
    return false;
  }
  if (!c.stream->Write(c.pending)) return false;
  c.last_write = now;
  c.health.Sent(Ns(now), /*health=*/false);
  ++counters_.batches_sent;
  counters_.records_sent += c.pending_n;
  c.unacked += c.pending_n;
  c.inflight.push_back(std::move(c.pending_f));
  c.pending.Clear();
  c.pending_f = InFlight{};
  c.pending_n = 0;
  hold_.Sent(Ns(now));
  return true;
}

bool IngestStreamer::StopIsDone(Connection& c, Clock::time_point now, size_t drained) {
  if (c.stop_deadline == Clock::time_point{}) c.stop_deadline = now + options_.stop_grace;
  if (!(c.inflight.empty() && drained == 0) && now < c.stop_deadline) return false;
  if (!c.inflight.empty() && log_) {
    log_(absl::StrCat(c.unacked,
                      " records not acknowledged at exit; they stay in the rings for the next "
                      "sidecar"));
  }
  return true;
}

void IngestStreamer::CloseStream(Connection& c, std::thread& reader) {
  c.stream->WritesDone();
  bool broken_by_server = false;
  {
    // Let the coordinator finish the stream with its own status (a refusal, a wrong token);
    // cancel only if it does not within a second.
    std::unique_lock<std::mutex> lock(mu_);
    broken_by_server = cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stream_broken_; });
  }
  if (!broken_by_server) c.context.TryCancel();
  reader.join();
}

void IngestStreamer::WarnStreamEnded(const grpc::Status& status) {
  if (!warn_) return;
  // Said at once, then once a minute while it keeps happening for the same reason.
  const std::string why =
      status.ok()
          ? "closed by the coordinator"
          : absl::StrCat(
                absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())), ": ",
                LogSafe(status.error_message(), 300));
  if (const std::optional<uint64_t> n = stream_ends_.Pass(why, 1, Clock::now())) {
    warn_(absl::StrCat("stream to coordinator ", options_.coordinator, " ended: ", why,
                       "; reconnecting",
                       *n > 1 ? absl::StrCat(" (", *n, " times in the last minute)") : ""));
  }
}

}  // namespace stagefrontier
