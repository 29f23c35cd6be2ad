// Cuts text that travels in proto3 `string` fields to a bounded length without splitting a
// character: proto3 parsers refuse a string that is not valid UTF-8, so a name cut in the
// middle of "é" would make every reply that carries it unreadable to sfctl and the web view.
//
//   kept->set_node(Utf8Prefix(r.node(), 256));   // r.node() came from a parsed message
#ifndef STAGEFRONTIER_DAEMON_COMMON_UTF8_PREFIX_H_
#define STAGEFRONTIER_DAEMON_COMMON_UTF8_PREFIX_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace stagefrontier {

// The longest prefix of `text` of at most `max_bytes` bytes that ends between two characters
// of UTF-8 `text` (a continuation byte is never the first byte left out). Text that is not
// UTF-8 is cut at most 3 bytes before `max_bytes`.
std::string Utf8Prefix(absl::string_view text, size_t max_bytes);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_UTF8_PREFIX_H_
