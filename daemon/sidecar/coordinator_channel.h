// The channel a sidecar streams to its coordinator on, made so that a slow handshake is
// waited for and a coordinator that comes back is found within the sidecar's own retry
// bounds.
//
// gRPC core (1.51) reads grpc.min_reconnect_backoff_ms as two things at once: the time one
// connection attempt (TCP + TLS + HTTP/2 SETTINGS) may take, and the least time between two
// attempts of a subchannel. Short (the sidecar's 100 ms retry delay, as it once was), every
// handshake on a loaded machine is cut off and a sidecar took 6 s to connect; long (20 s),
// a sidecar waits 20 s before it tries a restarted coordinator again. So each attempt gets a
// long connect timeout, and the sidecar paces its retries itself: after a failed attempt
// the next stream gets a fresh channel (with its own subchannel: no backoff carried over).
//
//   CoordinatorConnection connection(options, credentials);
//   while (...) { RunStream(connection.Channel()); wait the sidecar's backoff; }
#ifndef STAGEFRONTIER_DAEMON_SIDECAR_COORDINATOR_CHANNEL_H_
#define STAGEFRONTIER_DAEMON_SIDECAR_COORDINATOR_CHANNEL_H_

#include <chrono>
#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"

namespace stagefrontier {

struct CoordinatorChannelOptions {
  std::string target = "127.0.0.1:7311";
  std::chrono::milliseconds connect_timeout{20000};  // one TCP + TLS + HTTP/2 handshake
  int max_receive_message_bytes = 16 << 20;
};

// Returns a new channel to options.target with its own subchannel (never null; gRPC connects
// lazily, so a coordinator that is down shows up as UNAVAILABLE on the first call).
std::shared_ptr<grpc::Channel> CoordinatorChannel(
    const CoordinatorChannelOptions& options,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials);

// The channel for the next stream: the same while it is connected or connecting, a fresh
// one once it failed to connect (TRANSIENT_FAILURE) or was shut down. Not thread-safe.
class CoordinatorConnection {
 public:
  CoordinatorConnection(CoordinatorChannelOptions options,
                        std::shared_ptr<grpc::ChannelCredentials> credentials)
      : options_(std::move(options)), credentials_(std::move(credentials)) {}
  std::shared_ptr<grpc::Channel> Channel();
  // Channels made so far (1 after the first call).
  int channels_made() const { return made_; }

 private:
  CoordinatorChannelOptions options_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::shared_ptr<grpc::Channel> channel_;
  int made_ = 0;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIDECAR_COORDINATOR_CHANNEL_H_
