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
#include <vector>

#include "daemon/common/grpc_security.h"
#include "daemon/common/log_throttle.h"
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
  // Holds drained records up to this long so that one message carries several steps (the
  // coordinator's cost is per message: docs/results.md, "Coordinator ingest through gRPC");
  // 0 sends what each poll drained. A full batch, the unacknowledged-records bound and Stop()
  // send at once.
  std::chrono::milliseconds batch_delay{0};
  std::chrono::milliseconds rescan_every{1000};
  std::chrono::milliseconds health_every{2000};
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
  // One connection's life.
  StreamOutcome RunStream(std::shared_ptr<grpc::Channel> channel);
  // After a stream ended: shrinks batches, or drops a lone record, when the coordinator keeps
  // refusing the same batch.
  void OnStreamEnded(const StreamOutcome& outcome);

  StreamerOptions options_;
  const std::string host_;  // this machine, sent in every Hello
  SegmentDrainer* drainer_;
  Log log_;
  Log warn_;
  LogThrottle refusals_{std::chrono::seconds(60)};     // by (job, rank, code, message)
  LogThrottle stream_ends_{std::chrono::seconds(60)};  // by the reason a stream ended
  std::atomic<bool> stop_{false};
  size_t batch_limit_ = 0;  // current records per batch (shrinks on refused batches)
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::CoordinatorMessage> inbox_;
  bool stream_broken_ = false;
  StreamerCounters counters_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIDECAR_INGEST_STREAMER_H_
