// The open-descriptor limit of a server process. Every sidecar stream is a socket, and the
// common soft limit (1024) would make a coordinator refuse connections long before
// --max-streams; the hard limit is what the administrator allows (systemd's LimitNOFILE=,
// `ulimit -Hn`), so a server raises its soft limit toward what it needs, as far as allowed.
//
//   absl::StatusOr<uint64_t> limit = RaiseDescriptorLimit(max_streams + 256);
//   if (limit.ok() && *limit < wanted) { /* warn: fewer streams than configured */ }
#ifndef STAGEFRONTIER_DAEMON_COMMON_DESCRIPTOR_LIMIT_H_
#define STAGEFRONTIER_DAEMON_COMMON_DESCRIPTOR_LIMIT_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace stagefrontier {

// Raises this process's soft RLIMIT_NOFILE to `wanted`, or to the hard limit if that is lower;
// never lowers it. Returns the soft limit in effect afterwards. Fails (Internal, with errno's
// text) only if the limit cannot be read or set.
[[nodiscard]] absl::StatusOr<uint64_t> RaiseDescriptorLimit(uint64_t wanted);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_DESCRIPTOR_LIMIT_H_
