#include "daemon/accounting/verdict.h"

namespace stagefrontier {

const char* VerdictLabelName(VerdictLabel label) {
  switch (label) {
    case VerdictLabel::kHealthy:
      return "HEALTHY";
    case VerdictLabel::kClear:
      return "CLEAR";
    case VerdictLabel::kAmbiguous:
      return "AMBIGUOUS";
  }
  return "UNKNOWN";
}

const char* AmbiguityReasonName(AmbiguityReason reason) {
  switch (reason) {
    case AmbiguityReason::kNone:
      return "";
    case AmbiguityReason::kTie:
      return "TIE";
    case AmbiguityReason::kSplit:
      return "SPLIT";
    case AmbiguityReason::kMixedSync:
      return "MIXED_SYNC";
    case AmbiguityReason::kConcurrent:
      return "CONCURRENT";
  }
  return "UNKNOWN";
}

std::string LabelText(const Verdict& v) {
  std::string out = VerdictLabelName(v.label);
  if (v.reason != AmbiguityReason::kNone) out += std::string(" ") + AmbiguityReasonName(v.reason);
  return out;
}

}  // namespace stagefrontier
