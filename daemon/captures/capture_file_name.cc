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

// <prefix><R><middle><N><suffix>: the rank R and the number N.
template <typename T>
bool ParseRankAnd(std::string_view name, std::string_view prefix, std::string_view middle,
                  std::string_view suffix, int32_t* rank, T* number) {
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return false;
  name = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  const size_t sep = name.find(middle);
  return sep != std::string_view::npos && ParseDigits(name.substr(0, sep), rank) &&
         ParseDigits(name.substr(sep + middle.size()), number);
}

}  // namespace

std::optional<CaptureFileName> ParseCaptureFileName(std::string_view name) {
  std::optional<CaptureFileName> out = CaptureFileName{};
  if (ParseRankAnd(name, "trace_rank", "_step", ".json", &out->rank, &out->first_step)) {
    // One name per file: "trace_rank03_step7.json" would upload rank 3's trace twice.
    return name == CaptureFileNameFor(out->rank, out->first_step) ? out : std::nullopt;
  }
  out->first_step = -1;
  if (ParseRankAnd(name, "stacks_rank", "_capture", ".txt", &out->rank, &out->capture_id)) {
    out->kind = CaptureFileKind::kStacks;
    return out->capture_id > 0 && name == StacksFileNameFor(out->rank, out->capture_id)
               ? out
               : std::nullopt;
  }
  if (ParseRankAnd(name, "flightrec_rank", "_capture", ".json", &out->rank, &out->capture_id)) {
    out->kind = CaptureFileKind::kFlightRecorder;
    return out->capture_id > 0 && name == FlightRecorderFileNameFor(out->rank, out->capture_id)
               ? out
               : std::nullopt;
  }
  return std::nullopt;
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

std::string StacksFileNameFor(int32_t rank, uint64_t capture_id) {
  return absl::StrCat("stacks_rank", rank, "_capture", capture_id, ".txt");
}

std::string FlightRecorderFileNameFor(int32_t rank, uint64_t capture_id) {
  return absl::StrCat("flightrec_rank", rank, "_capture", capture_id, ".json");
}

}  // namespace stagefrontier
