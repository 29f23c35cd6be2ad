#include "daemon/captures/capture_upload_service.h"

#include "absl/strings/str_cat.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/grpc_status.h"

namespace stagefrontier {

grpc::Status CaptureUploadService::Upload(grpc::ServerContext* context,
                                          const v1::CaptureChunk* chunk, v1::CaptureChunkAck* ack) {
  if (!TokenMatches(*context, token_)) {
    return grpc::Status(grpc::UNAUTHENTICATED,
                        "missing or wrong token (authorization: Bearer ...)");
  }
  absl::StatusOr<v1::CaptureChunkAck> r = store_->Accept(*chunk);
  if (!r.ok()) {
    if (log_)
      log_(absl::StrCat("capture upload from node ", chunk->node().substr(0, 64), ": ",
                        r.status().message()));
    return ToGrpcStatus(r.status());
  }
  if (r->complete() && log_) {
    log_(absl::StrCat("capture ", chunk->file_name(), " of job ", chunk->job(), " stored (",
                      chunk->file_bytes(), " bytes, from node ", chunk->node().substr(0, 64), ")"));
  }
  *ack = *std::move(r);
  return grpc::Status::OK;
}

}  // namespace stagefrontier
