// The sidecar's connection to the coordinator: one long-lived bidirectional stream that
// carries step batches up and acknowledgements and control requests down. Reconnects with
// exponential backoff; after a reconnect it re-sends everything not acknowledged (the
// records are still in the rings: see segment_drainer.h). On Stop it drains what is left,
// waits a bounded time for the last acknowledgements and closes the stream.
//
// Nothing the coordinator refuses is re-sent forever: records refused in an acknowledgement
// are dropped (committed) and counted; a stream the coordinator ends because of a batch
// (INVALID_ARGUMENT, or RESOURCE_EXHAUSTED for a message too large) before anything was
// acknowledged makes the next batches smaller, down to one record, and a single record that
// is still refused is dropped with a log line. The log says the coordinator's own status
// (a wrong token, a refused batch), not CANCELLED.
//
//   IngestStreamer streamer(options, &drainer, log);
//   std::thread t([&] { streamer.Run(); });
//   ... on SIGTERM: streamer.Stop(); t.join();
#ifndef STAGEFRONTIER_DAEMON_SIDECAR_INGEST_STREAMER_H_
#define STAGEFRONTIER_DAEMON_SIDECAR_INGEST_STREAMER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daemon/common/grpc_security.h"
#include "daemon/common/log_throttle.h"
#include "daemon/sidecar/batch_hold.h"
#include "daemon/sidecar/health_cadence.h"
#include "daemon/sidecar/segment_drainer.h"
#include "stagefrontier/v1/ingest.grpc.pb.h"

namespace stagefrontier {

struct StreamerOptions {
  std::string coordinator = "127.0.0.1:7311";
  std::string node;
  std::string token;
  TlsFiles tls;
  size_t max_batch_records = 4096;
  size_t max_unacked_records = 65536;
  std::chrono::milliseconds poll_min{1};
  std::chrono::milliseconds poll_max{10};
  // How long drained records wait so that one message carries several steps (the coordinator's
  // cost is per message: docs/results.md, "Coordinator ingest through gRPC"). kAutoBatching:
  // the sidecar's own batching (batch_hold.h: batches end on step numbers, a few steps per
  // message); 0 sends what each poll drained; N holds them up to N ms. A full batch, the
  // unacknowledged-records bound, Stop() and an open stage that passed open_stage_report send
  // at once.
  static constexpr std::chrono::milliseconds kAutoBatching{-1};
  std::chrono::milliseconds batch_delay = kAutoBatching;
  BatchHoldOptions batch_hold;
  std::chrono::milliseconds rescan_every{1000};
  // When slot health goes out (health_cadence.h): its stall cadence applies while a rank's open
  // stage is older than open_stage_report (a stall forming: the coordinator reads where the
  // ranks are), its quiet one otherwise.
  HealthCadenceOptions health;
  // Health goes out at once, outside the period, when a rank's open stage becomes older than
  // this (once per open stage; checked every open_stage_check): the coordinator names a hung
  // rank sooner. 0: never.
  std::chrono::milliseconds open_stage_report{1000};
  std::chrono::milliseconds open_stage_check{100};
  std::chrono::milliseconds backoff_min{100};
  std::chrono::milliseconds backoff_max{5000};
  std::chrono::milliseconds connect_timeout{20000};  // one handshake; see coordinator_channel.h
  std::chrono::milliseconds stop_grace{5000};
};

struct StreamerCounters {
  std::atomic<uint64_t> batches_sent{0};
  std::atomic<uint64_t> records_sent{0};
  std::atomic<uint64_t> records_acked{0};
  std::atomic<uint64_t> reconnects{0};
  std::atomic<uint64_t> rejections{0};              // per-rank refusals in acknowledgements
  std::atomic<uint64_t> records_refused{0};         // records those refusals dropped
  std::atomic<uint64_t> records_dropped_poison{0};  // single records whose batch kept failing
  std::atomic<uint64_t> health_sent{0};             // Health messages written
  std::atomic<uint64_t> health_riding{0};           // health that rode a batch instead
};

class IngestStreamer {
 public:
  using Log = std::function<void(const std::string&)>;
  // `warn` (default: `log`) gets what needs someone's attention: records the coordinator
  // refuses, and a stream that ended; each said once, then at most once a minute with the
  // count since.
  IngestStreamer(StreamerOptions options, SegmentDrainer* drainer, Log log, Log warn = nullptr);

  // Runs until Stop(). Returns after the final flush.
  void Run();
  // Asks Run to flush and return; safe from any thread.
  void Stop();
  const StreamerCounters& counters() const { return counters_; }

 private:
  struct InFlight {
    uint64_t seq = 0;
    size_t records = 0;
    std::vector<CommitPoint> commits;
  };
  struct StreamOutcome {
    bool progressed = false;                 // something was acknowledged (resets the backoff)
    grpc::Status status;                     // how the coordinator ended it
    std::vector<CommitPoint> first_unacked;  // the oldest batch still unacknowledged
    size_t first_unacked_records = 0;
  };
  using Clock = std::chrono::steady_clock;
  // One connection's state, from the Hello to Finish.
  struct Connection {
    std::unique_ptr<v1::Ingest::Stub> stub;
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::SidecarMessage, v1::CoordinatorMessage>> stream;
    std::deque<InFlight> inflight;
    size_t unacked = 0;
    uint64_t seq = 0;
    Clock::time_point next_rescan;
    HealthCadence health;
    // The coordinator said its StreamLimits, or acked first (it predates them): the cadence
    // is settled for this stream (CadenceFor).
    bool limits_known = false;
    Clock::time_point last_write{};  // the last batch or health written (not Hello or acks)
    bool stage_open_long = false;  // as of the last open-stage check
    Clock::time_point next_open_check;
    // The slots' health has news since the last health sent (HealthNews; checked with the
    // open stages): what was sent, and whether what is there now differs.
    std::string health_sent;
    bool health_news = false;
    bool capture_news = false;  // a capture answer changed since the last health sent
    bool batch_health = false;  // the coordinator reads StepBatch.health (StreamLimits)
    std::chrono::milliseconds poll{0};
    Clock::time_point stop_deadline{};
    // The batch being filled (batch_delay): drained, not yet sent. Dropped with the stream;
    // the drainer's rewind reads it again.
    v1::SidecarMessage pending;
    InFlight pending_f;
    size_t pending_n = 0;
    Clock::time_point pending_since{};
    StreamOutcome outcome;
  };
  // One connection's life: OpenStream, SendLoop, CloseStream, then the coordinator's status.
  StreamOutcome RunStream(std::shared_ptr<grpc::Channel> channel);
  // Opens the stream and says Hello; false when the Hello could not be written.
  bool OpenStream(Connection& c, std::shared_ptr<grpc::Channel> channel);
  // The reader thread: queues what the coordinator sends into inbox_.
  void ReadReplies(Connection& c);
  // Drains, batches and sends until the stream breaks or Stop() is done.
  void SendLoop(Connection& c);
  // Handles what the reader queued; false when the stream broke or a reply failed.
  bool HandleInbox(Connection& c);
  void OnAck(Connection& c, const v1::BatchAck& ack);
  // Keeps the health cadence inside the coordinator's limits (null: it predates them).
  void OnLimits(Connection& c, const v1::StreamLimits* limits);
  void WarnRefused(const v1::Rejection& r);
  // Applies a control request and answers it; false when the answer could not be written.
  bool OnControl(Connection& c, const v1::ControlRequest& request);
  // Every slot's health, now. False when the stream broke.
  bool SendHealth(Connection& c, Clock::time_point now);
  // Fills `out` with every slot's health and counts it sent at `now` (cadence, news).
  void TakeHealth(Connection& c, Clock::time_point now, v1::Health* out);
  // How long the next batch is expected to take after this one: the hold (BatchHold::HoldNs,
  // or batch_delay). Health that comes due sooner rides this one (HealthCadence::RidesBatch);
  // a next batch that comes later (the ranks slowed or stopped) leaves health to the cadence.
  int64_t NextBatchWithinNs() const;
  // Drains what fits into the pending batch; returns the records drained.
  size_t DrainIntoPending(Connection& c, Clock::time_point now);
  // Sends the pending batch when due (now, with `force`); false when the stream broke.
  bool SendPendingIfDue(Connection& c, Clock::time_point now, bool force = false);
  // Whether the pending batch has been held long enough (batch_delay).
  bool HoldIsOver(const Connection& c, Clock::time_point now) const;
  // After Stop(): true once everything sent was acknowledged or the grace ran out.
  bool StopIsDone(Connection& c, Clock::time_point now, size_t drained);
  // Half-closes the stream, lets the coordinator end it, and joins the reader.
  void CloseStream(Connection& c, std::thread& reader);
  // Says why a stream ended (throttled).
  void WarnStreamEnded(const grpc::Status& status);
  // After a stream ended: shrinks batches, or drops a lone record, when the coordinator keeps
  // refusing the same batch.
  void OnStreamEnded(const StreamOutcome& outcome);
  // Waits out the reconnect backoff (or Stop()); returns the next one.
  std::chrono::milliseconds Backoff(std::chrono::milliseconds backoff, bool progressed);

  StreamerOptions options_;
  const std::string host_;  // this machine, sent in every Hello
  SegmentDrainer* drainer_;
  Log log_;
  Log warn_;
  LogThrottle refusals_{std::chrono::seconds(60)};     // by (job, rank, code, message)
  LogThrottle stream_ends_{std::chrono::seconds(60)};  // by the reason a stream ended
  std::atomic<bool> stop_{false};
  size_t batch_limit_ = 0;  // current records per batch (shrinks on refused batches)
  BatchHold hold_;          // batch_delay == kAutoBatching; the send loop's thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::CoordinatorMessage> inbox_;
  bool stream_broken_ = false;
  StreamerCounters counters_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIDECAR_INGEST_STREAMER_H_
