#include "daemon/common/duration_format.h"

#include "absl/strings/str_format.h"

namespace stagefrontier {

std::string FormatMs(double ns) { return absl::StrFormat("%.2f ms", ns / 1e6); }

std::string FormatMsNumber(double ns) { return absl::StrFormat("%.2f", ns / 1e6); }

std::string FormatSeconds(double ns) { return absl::StrFormat("%.1f s", ns / 1e9); }

}  // namespace stagefrontier
