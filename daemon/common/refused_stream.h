// A gRPC callback stream refused before it starts (a wrong token, an unknown job, too many
// streams, shutting down): it finishes at once with the status and frees itself.
//
//   grpc::ServerWriteReactor<v1::VerdictEvent>* WatchVerdicts(...) override {
//     if (!ok) return RefuseStream<grpc::ServerWriteReactor<v1::VerdictEvent>>(status);
//   }
//
// Works for any server reactor type (write, read, bidi): all finish with Finish(Status).
#ifndef STAGEFRONTIER_DAEMON_COMMON_REFUSED_STREAM_H_
#define STAGEFRONTIER_DAEMON_COMMON_REFUSED_STREAM_H_

#include <utility>

#include "grpcpp/grpcpp.h"

namespace stagefrontier {

template <typename Reactor>
class RefusedStream final : public Reactor {
 public:
  explicit RefusedStream(grpc::Status status) { this->Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

// A new reactor that ends its call with `status`; gRPC owns it once returned from the method.
template <typename Reactor>
Reactor* RefuseStream(grpc::Status status) {
  return new RefusedStream<Reactor>(std::move(status));
}

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_REFUSED_STREAM_H_
