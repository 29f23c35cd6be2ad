#include "daemon/sidecar/ingest_streamer.h"

#include <unistd.h>

#include <random>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/host_name.h"
#include "daemon/common/log_safe.h"
#include "daemon/sidecar/coordinator_channel.h"

namespace stagefrontier {
namespace {

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

using Clock = std::chrono::steady_clock;

}  // namespace

IngestStreamer::IngestStreamer(StreamerOptions options, SegmentDrainer* drainer, Log log, Log warn)
    : options_(std::move(options)),
      host_(HostName()),
      drainer_(drainer),
      log_(std::move(log)),
      warn_(warn ? std::move(warn) : log_) {}

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
    if (outcome.progressed) backoff = options_.backoff_min;
    ++counters_.reconnects;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, backoff, [&] { return stop_.load(); });
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
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
  auto stub = v1::Ingest::NewStub(channel);
  grpc::ClientContext context;
  AttachToken(&context, options_.token);
  std::unique_ptr<grpc::ClientReaderWriter<v1::SidecarMessage, v1::CoordinatorMessage>> stream =
      stub->Stream(&context);
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
  StreamOutcome outcome;
  bool& progressed = outcome.progressed;
  bool broken_by_server = false;
  if (stream->Write(hello)) {
    // Everything not acknowledged goes again on this stream.
    drainer_->Rewind();
    std::thread reader([&] {
      v1::CoordinatorMessage msg;
      while (stream->Read(&msg)) {
        std::lock_guard<std::mutex> lock(mu_);
        inbox_.push_back(msg);
        cv_.notify_all();
      }
      std::lock_guard<std::mutex> lock(mu_);
      stream_broken_ = true;
      cv_.notify_all();
    });
    std::deque<InFlight> inflight;
    size_t unacked = 0;
    uint64_t seq = 0;
    auto next_rescan = Clock::now();
    auto next_health = Clock::now() + options_.health_every;
    // Every slot's health, now; the next regular report is one interval later. False when the
    // stream broke.
    auto send_health = [&](Clock::time_point now) {
      v1::SidecarMessage h;
      drainer_->FillHealth(h.mutable_health());
      next_health = now + options_.health_every;
      return h.health().slots_size() == 0 || stream->Write(h);
    };
    auto poll = options_.poll_min;
    std::chrono::steady_clock::time_point stop_deadline{};
    // The batch being filled (batch_delay): drained, not yet sent. Dropped with the stream;
    // the drainer's rewind reads it again.
    v1::SidecarMessage pending;
    InFlight pending_f;
    size_t pending_n = 0;
    Clock::time_point pending_since{};
    bool ok = true;
    while (ok) {
      std::deque<v1::CoordinatorMessage> got;
      bool broken = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        got.swap(inbox_);
        broken = stream_broken_;
      }
      for (const v1::CoordinatorMessage& m : got) {
        if (m.has_ack()) {
          const v1::BatchAck& ack = m.ack();
          while (!inflight.empty() && inflight.front().seq <= ack.batch_seq()) {
            drainer_->Commit(inflight.front().commits);
            unacked -= inflight.front().records;
            counters_.records_acked += inflight.front().records;
            inflight.pop_front();
          }
          progressed = true;
          // Acknowledged batches earn back their size.
          batch_limit_ = std::min(options_.max_batch_records, batch_limit_ * 2);
          for (const v1::Rejection& r : ack.rejections()) {
            // Refused records are committed with the batch: dropped, counted, and said at once,
            // then once a minute with how many since (a rank refused for good refuses all).
            ++counters_.rejections;
            counters_.records_refused += r.records();
            const std::string what =
                absl::StrCat(" records of job ", LogSafe(r.job()), " rank ", r.rank(), " (",
                             absl::StatusCodeToString(static_cast<absl::StatusCode>(r.code())),
                             "): ", LogSafe(r.message(), 300));
            if (const std::optional<uint64_t> n =
                    refusals_.Pass(what, r.records(), std::chrono::steady_clock::now());
                n && warn_) {
              warn_(absl::StrCat("coordinator refused ", *n, what,
                                 r.records() == *n ? "" : " (since the last line, a minute ago)"));
            }
          }
        } else if (m.has_control()) {
          v1::SidecarMessage reply;
          *reply.mutable_control_ack() = drainer_->ApplyControl(m.control());
          if (log_) {
            log_(absl::StrCat(
                "control request ", m.control().request_id(), " for job ", m.control().job(),
                reply.control_ack().applied() ? " applied" : ": " + reply.control_ack().error()));
          }
          ok = stream->Write(reply);
        }
      }
      if (broken || !ok) break;
      const auto now = Clock::now();
      if (now >= next_rescan) {
        drainer_->Rescan();
        next_rescan = now + options_.rescan_every;
      }
      // A stub's capture answer goes out at once: the next request's answer replaces it in the
      // slot, possibly before the regular report.
      if ((now >= next_health || drainer_->CaptureAnswersChanged()) && !send_health(now)) break;
      size_t n = 0;
      const size_t held = unacked + pending_n;
      if (held < options_.max_unacked_records && pending_n < batch_limit_) {
        n = drainer_->Drain(
            pending.mutable_batch(), &pending_f.commits,
            std::min(batch_limit_ - pending_n, options_.max_unacked_records - held));
        if (n > 0 && pending_n == 0) pending_since = now;
        pending_n += n;
      }
      const bool due = options_.batch_delay.count() == 0 || stop_ || pending_n >= batch_limit_ ||
                       unacked + pending_n >= options_.max_unacked_records || pending_n == 0 ||
                       now - pending_since >= options_.batch_delay;
      if ((pending_n > 0 || !pending_f.commits.empty()) && due) {
        pending_f.seq = ++seq;
        pending_f.records = pending_n;
        pending.mutable_batch()->set_batch_seq(pending_f.seq);
        // Ranks the coordinator does not know until this batch: their health (whether their
        // trainer can capture) goes first, on the same ordered stream; the coordinator holds
        // it until the declaration and so has it when this very batch closes the job's first
        // window. Sent behind the batch, it came too late whenever the sidecar found a
        // segment with a window's steps already written ("cannot capture" on a capable rank).
        if (pending.batch().declarations_size() > 0 && !send_health(now)) break;
        if (!stream->Write(pending)) break;
        ++counters_.batches_sent;
        counters_.records_sent += pending_n;
        unacked += pending_n;
        inflight.push_back(std::move(pending_f));
        pending.Clear();
        pending_f = InFlight{};
        pending_n = 0;
      }
      if (stop_) {
        if (stop_deadline == Clock::time_point{}) stop_deadline = now + options_.stop_grace;
        if ((inflight.empty() && n == 0) || now >= stop_deadline) {
          if (!inflight.empty() && log_) {
            log_(absl::StrCat(unacked,
                              " records not acknowledged at exit; they stay in the "
                              "rings for the next sidecar"));
          }
          break;
        }
      }
      poll = n > 0 ? options_.poll_min : std::min(poll * 2, options_.poll_max);
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, poll, [&] { return !inbox_.empty() || stream_broken_; });
    }
    if (!inflight.empty()) {
      outcome.first_unacked = inflight.front().commits;
      outcome.first_unacked_records = inflight.front().records;
    }
    stream->WritesDone();
    {
      // Let the coordinator finish the stream with its own status (a refusal, a wrong
      // token); cancel only if it does not within a second.
      std::unique_lock<std::mutex> lock(mu_);
      broken_by_server =
          cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stream_broken_; });
    }
    if (!broken_by_server) context.TryCancel();
    reader.join();
  }
  outcome.status = stream->Finish();
  if (!stop_ && warn_) {
    // Said at once, then once a minute while it keeps happening for the same reason.
    const grpc::Status& status = outcome.status;
    const std::string why =
        status.ok()
            ? "closed by the coordinator"
            : absl::StrCat(
                  absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())),
                  ": ", LogSafe(status.error_message(), 300));
    if (const std::optional<uint64_t> n =
            stream_ends_.Pass(why, 1, std::chrono::steady_clock::now())) {
      warn_(absl::StrCat("stream to coordinator ", options_.coordinator, " ended: ", why,
                         "; reconnecting",
                         *n > 1 ? absl::StrCat(" (", *n, " times in the last minute)") : ""));
    }
  }
  return outcome;
}

}  // namespace stagefrontier
