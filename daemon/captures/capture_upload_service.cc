#include "daemon/captures/capture_upload_service.h"

#include "absl/strings/str_cat.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/grpc_status.h"

namespace stagefrontier {

CaptureUploadService::CaptureUploadService(CaptureStore* store, std::string token, Log log,
                                           size_t max_queued)
    : store_(store),
      token_(std::move(token)),
      log_(std::move(log)),
      max_queued_(max_queued),
      worker_([this] { Work(); }) {}

CaptureUploadService::~CaptureUploadService() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

grpc::ServerUnaryReactor* CaptureUploadService::Upload(grpc::CallbackServerContext* context,
                                                       const v1::CaptureChunk* chunk,
                                                       v1::CaptureChunkAck* ack) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!TokenMatches(*context, token_)) {
    reactor->Finish(
        grpc::Status(grpc::UNAUTHENTICATED, "missing or wrong token (authorization: Bearer ...)"));
    return reactor;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_ && queue_.size() < max_queued_) {
      queue_.push_back(Pending{reactor, chunk, ack});
      cv_.notify_one();
      return reactor;
    }
    ++busy_refusals_;
  }
  reactor->Finish(grpc::Status(
      grpc::UNAVAILABLE, absl::StrCat("capture uploads are busy (", max_queued_,
                                      " chunks waiting to be written): send it again later")));
  return reactor;
}

uint64_t CaptureUploadService::busy_refusals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_refusals_;
}

void CaptureUploadService::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    const Pending p = queue_.front();
    queue_.pop_front();
    if (stop_) {
      lock.unlock();
      p.reactor->Finish(grpc::Status(grpc::UNAVAILABLE, "the coordinator is shutting down"));
    } else {
      lock.unlock();
      p.reactor->Finish(Store(*p.chunk, p.ack));
    }
    lock.lock();
  }
}

grpc::Status CaptureUploadService::Store(const v1::CaptureChunk& chunk, v1::CaptureChunkAck* ack) {
  absl::StatusOr<v1::CaptureChunkAck> r = store_->Accept(chunk);
  if (!r.ok()) {
    if (log_) {
      log_(absl::StrCat("capture upload from node ", chunk.node().substr(0, 64), ": ",
                        r.status().message()));
    }
    return ToGrpcStatus(r.status());
  }
  if (r->complete() && log_) {
    log_(absl::StrCat("capture ", chunk.file_name(), " of job ", chunk.job(), " stored (",
                      chunk.file_bytes(), " bytes, from node ", chunk.node().substr(0, 64), ")"));
  }
  *ack = *std::move(r);
  return grpc::Status::OK;
}

}  // namespace stagefrontier
