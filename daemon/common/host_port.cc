#include "daemon/common/host_port.h"

namespace stagefrontier {

std::optional<HostPort> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  HostPort out{.host = address.substr(0, colon), .port = address.substr(colon + 1)};
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  return out;
}

}  // namespace stagefrontier
