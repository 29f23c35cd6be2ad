#include "daemon/nodes/node_name.h"

namespace stagefrontier {

bool SafeNodeName(const std::string& node) {
  if (node.empty() || node.size() > 253) return false;
  for (char c : node) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace stagefrontier
