#include "daemon/sidecar/coordinator_channel.h"

#include <algorithm>
#include <climits>

namespace stagefrontier {

std::shared_ptr<grpc::Channel> CoordinatorChannel(
    const CoordinatorChannelOptions& options,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  const auto ms = [](std::chrono::milliseconds d) {
    return static_cast<int>(std::clamp<int64_t>(d.count(), 1, INT_MAX));
  };
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, ms(options.connect_timeout));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              ms(std::max(options.retry_max, options.retry_min)));
  // In gRPC core this is the minimum connect timeout, not a delay (see the header).
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, ms(options.connect_timeout));
  return grpc::CreateCustomChannel(options.target, credentials, args);
}

}  // namespace stagefrontier
