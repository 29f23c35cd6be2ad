#include "daemon/sidecar/coordinator_channel.h"

#include <algorithm>
#include <climits>

namespace stagefrontier {

std::shared_ptr<grpc::Channel> CoordinatorChannel(
    const CoordinatorChannelOptions& options,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  const int timeout_ms =
      static_cast<int>(std::clamp<int64_t>(options.connect_timeout.count(), 1, INT_MAX));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  // The connect timeout (see the header); gRPC's own retries are no faster, so the caller
  // retries with a fresh channel instead.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, timeout_ms);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, timeout_ms);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, timeout_ms);
  // Its own subchannel: a fresh channel must not inherit the failed one's backoff.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // No bandwidth-delay probing: the sidecar receives only acknowledgements and small control
  // messages, and each probe is a PING the coordinator answers (docs/results.md, "Coordinator
  // ingest through gRPC": with the coordinator's own, 16 points of a core at 12,500 sidecars).
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  return grpc::CreateCustomChannel(options.target, credentials, args);
}

std::shared_ptr<grpc::Channel> CoordinatorConnection::Channel() {
  if (channel_ != nullptr) {
    const grpc_connectivity_state s = channel_->GetState(/*try_to_connect=*/false);
    if (s != GRPC_CHANNEL_TRANSIENT_FAILURE && s != GRPC_CHANNEL_SHUTDOWN) return channel_;
  }
  channel_ = CoordinatorChannel(options_, credentials_);
  ++made_;
  return channel_;
}

}  // namespace stagefrontier
