// The coordinator's side of capture collection (proto/stagefrontier/v1/captures.proto), on
// gRPC's callback API: checks the token, hands each chunk to the CaptureStore on one worker
// thread of its own (a chunk is a disk write, kept off gRPC's threads, which serve the ingest
// streams) and maps the store's refusals to status codes. At most `max_queued` chunks wait;
// beyond, a chunk is answered UNAVAILABLE (the sidecar sends it again on its next pass).
//
//   CaptureUploadService uploads(&store, token);
//   builder.RegisterService(&uploads);   // destroy after the server has shut down
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_UPLOAD_SERVICE_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_UPLOAD_SERVICE_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "daemon/captures/capture_store.h"
#include "stagefrontier/v1/captures.grpc.pb.h"

namespace stagefrontier {

class CaptureUploadService final : public v1::CaptureCollection::CallbackService {
 public:
  using Log = std::function<void(const std::string&)>;
  CaptureUploadService(CaptureStore* store, std::string token, Log log = nullptr,
                       size_t max_queued = 16);
  // Answers what still waits UNAVAILABLE and stops the worker.
  ~CaptureUploadService() override;

  grpc::ServerUnaryReactor* Upload(grpc::CallbackServerContext* context,
                                   const v1::CaptureChunk* chunk,
                                   v1::CaptureChunkAck* ack) override;

  // Chunks answered UNAVAILABLE because max_queued were waiting.
  uint64_t busy_refusals() const;

 private:
  struct Pending {
    grpc::ServerUnaryReactor* reactor;
    const v1::CaptureChunk* chunk;
    v1::CaptureChunkAck* ack;
  };
  void Work();
  grpc::Status Store(const v1::CaptureChunk& chunk, v1::CaptureChunkAck* ack);

  CaptureStore* store_;
  const std::string token_;
  const Log log_;
  const size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stop_ = false;
  uint64_t busy_refusals_ = 0;
  std::thread worker_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_UPLOAD_SERVICE_H_
