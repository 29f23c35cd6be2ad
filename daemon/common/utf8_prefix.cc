#include "daemon/common/utf8_prefix.h"

namespace stagefrontier {

std::string Utf8Prefix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  // The first byte left out continues a character (10xxxxxx): that character goes too. A
  // character is at most 4 bytes long.
  for (int back = 0; back < 3 && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80;
       ++back) {
    --cut;
  }
  return std::string(text.substr(0, cut));
}

}  // namespace stagefrontier
