#include "daemon/coordinator/ingest_service.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "daemon/common/log_safe.h"
#include "daemon/common/refused_stream.h"
#include "daemon/common/thread_name.h"
#include "shm/monotonic_clock.h"

namespace stagefrontier {

IngestService::IngestService(JobRegistry* jobs, SidecarSessions* sessions,
                             CoordinatorMetrics* metrics, std::string token, ResourceLimits limits,
                             Log log, SelfTestBook* self_tests)
    : deps_{.jobs = jobs,
            .sessions = sessions,
            .metrics = metrics,
            .acker = nullptr,
            .token = std::move(token),
            .limits = limits,
            .log = std::move(log),
            .self_tests = self_tests,
            .nodes = nullptr,
            .capture_answers = nullptr,
            .terms = SidecarTerms{}},
      acker_(deps_.log) {
  deps_.acker = &acker_;
  watchdog_ = std::thread([this] {
    NameThisThread("stream-watch");
    WatchStreams();
  });
}

IngestService::~IngestService() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  stopped_.NotifyAll();
  watchdog_.join();
}

size_t IngestService::live_streams() const {
  MutexLock lock(&mu_);
  return live_.size();
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* IngestService::Stream(
    grpc::CallbackServerContext* context) {
  IngestStream* stream = nullptr;
  {
    MutexLock lock(&mu_);
    if (static_cast<int32_t>(live_.size()) >= deps_.limits.max_streams) {
      deps_.metrics->stream_errors(absl::StatusCode::kResourceExhausted).Increment();
      deps_.metrics->streams_cut("too_many_streams").Increment();
      const std::string message = absl::StrCat("this coordinator already serves ", live_.size(),
                                               " ingest streams (--max-streams); try again later");
      if (deps_.log) {
        deps_.log(
            absl::StrCat("ingest stream from ", LogSafe(context->peer()), " refused: ", message));
      }
      return RefuseStream<grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>>(
          grpc::Status(grpc::RESOURCE_EXHAUSTED, message));
    }
    const uint64_t id = next_id_++;
    stream = new IngestStream(deps_, context, id, shm::MonotonicNowNs(), [this](uint64_t done) {
      MutexLock done_lock(&mu_);
      live_.erase(done);
      awaiting_hello_.erase(done);
    });
    live_[id] = stream;
    awaiting_hello_[id] = stream;
  }
  stream->Start();
  return stream;
}

void IngestService::WatchStreams() {
  MutexLock lock(&mu_);
  while (!stop_) {
    stopped_.WaitUntil(&mu_, std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
    const int64_t now = shm::MonotonicNowNs();
    // Under the lock: a stream cannot be deleted while we look at it (OnDone takes it first).
    // Only the streams not yet seen with a Hello: thousands of open streams are not walked
    // five times a second (docs/results.md "Coordinator ingest through gRPC").
    std::erase_if(awaiting_hello_,
                  [now](const auto& entry) { return entry.second->CheckHelloDeadline(now); });
    // Every stream, at a tenth of the limit (at most every 5 s; the loop wakes every 200 ms):
    // a stream is ended within 10% past its limit, at 2,500 streams a second at 12,500.
    const int64_t limit_ns = deps_.limits.idle_timeout_ms * 1'000'000;
    if (limit_ns <= 0 || now - idle_checked_ns_ < std::min<int64_t>(limit_ns / 10, 5'000'000'000))
      continue;
    idle_checked_ns_ = now;
    for (const auto& [id, stream] : live_) stream->CheckIdle(now);
  }
}

}  // namespace stagefrontier
