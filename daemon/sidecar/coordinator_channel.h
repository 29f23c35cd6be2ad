// The channel a sidecar opens to its coordinator, with reconnect settings that suit a
// long-lived stream to one peer that may restart.
//
// gRPC's defaults wait 1 s before the first retry and grow to 2 min; a sidecar should find a
// restarted coordinator within its own bounds, so the retry delays come from the caller.
// gRPC takes the *time one connection attempt may last* from the same family of arguments
// (grpc.min_reconnect_backoff_ms is the minimum connect timeout in gRPC core, see
// doc/connection-backoff.md): setting it to the short retry delay gives every TCP + HTTP/2
// handshake only that long, and a coordinator on a loaded machine then never gets connected
// to. The connect timeout is therefore its own setting. A refused connection (no
// coordinator yet) fails at once whatever the timeout, so a long one costs nothing there.
//
//   CoordinatorChannelOptions o;
//   o.target = "coord:7311";
//   auto channel = CoordinatorChannel(o, grpc::InsecureChannelCredentials());
#ifndef STAGEFRONTIER_DAEMON_SIDECAR_COORDINATOR_CHANNEL_H_
#define STAGEFRONTIER_DAEMON_SIDECAR_COORDINATOR_CHANNEL_H_

#include <chrono>
#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"

namespace stagefrontier {

struct CoordinatorChannelOptions {
  std::string target = "127.0.0.1:7311";
  std::chrono::milliseconds retry_min{100};          // first delay after a failed attempt
  std::chrono::milliseconds retry_max{5000};         // the delay grows up to this
  std::chrono::milliseconds connect_timeout{20000};  // one TCP + TLS + HTTP/2 handshake
  int max_receive_message_bytes = 16 << 20;
};

// Returns a channel to options.target (never null; gRPC connects lazily, so a coordinator
// that is down shows up as UNAVAILABLE on the first call, not here).
std::shared_ptr<grpc::Channel> CoordinatorChannel(
    const CoordinatorChannelOptions& options,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIDECAR_COORDINATOR_CHANNEL_H_
