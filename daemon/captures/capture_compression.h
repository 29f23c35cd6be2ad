// zlib (RFC 1950) for capture chunks on the wire: Chrome traces are JSON text and shrink
// about tenfold.
//
//   std::string packed = DeflateChunk(bytes);
//   absl::StatusOr<std::string> back = InflateChunk(packed, bytes.size());
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_COMPRESSION_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_COMPRESSION_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace stagefrontier {

// `raw` compressed; never fails for inputs under 4 GiB (the chunks are far smaller).
std::string DeflateChunk(std::string_view raw);

// `packed` inflated; InvalidArgument when it is not a zlib stream, is cut short, or does not
// come to exactly `raw_bytes` bytes (so a hostile chunk cannot make it allocate more).
[[nodiscard]] absl::StatusOr<std::string> InflateChunk(std::string_view packed, size_t raw_bytes);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_COMPRESSION_H_
