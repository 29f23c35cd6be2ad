#include "daemon/captures/capture_file_name.h"

#include <charconv>

#include "absl/strings/str_cat.h"

namespace stagefrontier {
namespace {

// Decimal digits only (no sign, no spaces), at most 18 of them.
template <typename T>
bool ParseDigits(std::string_view s, T* out) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::optional<CaptureFileName> ParseCaptureFileName(std::string_view name) {
  constexpr std::string_view kPrefix = "trace_rank", kSuffix = ".json", kStep = "_step";
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return std::nullopt;
  name = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  const size_t sep = name.find(kStep);
  if (sep == std::string_view::npos) return std::nullopt;
  CaptureFileName out;
  if (!ParseDigits(name.substr(0, sep), &out.rank) ||
      !ParseDigits(name.substr(sep + kStep.size()), &out.first_step)) {
    return std::nullopt;
  }
  return out;
}

bool IsCapturePartFileName(std::string_view name) {
  constexpr std::string_view kPart = ".part";
  if (!name.ends_with(kPart)) return false;
  name.remove_suffix(kPart.size());
  const size_t dot = name.rfind('.');
  int64_t pid = 0;
  return dot != std::string_view::npos && ParseDigits(name.substr(dot + 1), &pid) &&
         ParseCaptureFileName(name.substr(0, dot)).has_value();
}

std::string CaptureFileNameFor(int32_t rank, int64_t first_step) {
  return absl::StrCat("trace_rank", rank, "_step", first_step, ".json");
}

}  // namespace stagefrontier
