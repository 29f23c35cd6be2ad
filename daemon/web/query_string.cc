#include "daemon/web/query_string.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace stagefrontier {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = absl::ascii_tolower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

absl::StatusOr<std::string> Unescape(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%') {
      const int hi = i + 2 < s.size() ? HexDigit(s[i + 1]) : -1;
      const int lo = i + 2 < s.size() ? HexDigit(s[i + 2]) : -1;
      if (i + 2 >= s.size() || hi < 0 || lo < 0) {
        return absl::InvalidArgumentError(absl::StrCat("bad %-escape at character ", i));
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> ParseQueryString(absl::string_view query) {
  std::map<std::string, std::string> out;
  for (absl::string_view part : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(part, absl::MaxSplits('=', 1));
    absl::StatusOr<std::string> key = Unescape(kv.first);
    if (!key.ok()) return key.status();
    absl::StatusOr<std::string> value = Unescape(kv.second);
    if (!value.ok()) return value.status();
    if (!out.emplace(*key, *value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", key->substr(0, 40), " given twice"));
    }
  }
  return out;
}

}  // namespace stagefrontier
