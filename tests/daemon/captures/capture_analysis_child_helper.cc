// The coordinator's first line, alone: answers a capture analysis child's arguments.
#include <cstdio>
#include <optional>

#include "daemon/captures/capture_analysis_child.h"

int main(int argc, char** argv) {
  if (std::optional<int> rc = stagefrontier::RunCaptureAnalysisChildIfAsked(argc, argv)) {
    return *rc;
  }
  std::fprintf(stderr, "capture_analysis_child_helper: not a child's arguments\n");
  return 2;
}
