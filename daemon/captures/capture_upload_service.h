// The coordinator's side of capture collection (proto/stagefrontier/v1/captures.proto): checks
// the token, hands each chunk to the CaptureStore and maps its refusals to status codes.
//
//   CaptureUploadService uploads(&store, token);
//   builder.RegisterService(&uploads);
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_UPLOAD_SERVICE_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_UPLOAD_SERVICE_H_

#include <functional>
#include <string>

#include "daemon/captures/capture_store.h"
#include "stagefrontier/v1/captures.grpc.pb.h"

namespace stagefrontier {

class CaptureUploadService final : public v1::CaptureCollection::Service {
 public:
  using Log = std::function<void(const std::string&)>;
  CaptureUploadService(CaptureStore* store, std::string token, Log log = nullptr)
      : store_(store), token_(std::move(token)), log_(std::move(log)) {}

  grpc::Status Upload(grpc::ServerContext* context, const v1::CaptureChunk* chunk,
                      v1::CaptureChunkAck* ack) override;

 private:
  CaptureStore* store_;
  std::string token_;
  Log log_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_UPLOAD_SERVICE_H_
