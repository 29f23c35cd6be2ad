// The sidecar's command line: flags into SidecarOptions, then the checks that need more than
// one flag (the token file, --route, --route with --job). Flags and help text are documented
// in docs/operations.md; tests/deploy reads them from there.
//
//   SidecarOptions o;
//   if (std::optional<int> rc = ParseSidecarOptions(argc, argv, &o)) return *rc;
//   if (absl::Status s = ResolveSidecarOptions(&o); !s.ok()) { log s.message(); return 2; }
#ifndef STAGEFRONTIER_DAEMON_SIDECAR_SIDECAR_OPTIONS_H_
#define STAGEFRONTIER_DAEMON_SIDECAR_SIDECAR_OPTIONS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/sidecar/ingest_streamer.h"
#include "daemon/sidecar/segment_drainer.h"
#include "daemon/sidecar/sidecar_routes.h"

namespace stagefrontier {

struct SidecarOptions {
  StreamerOptions stream;  // node, coordinator, TLS; token once resolved
  DrainerOptions drain;    // the segment directory, --job, a created segment
  std::string token_file;
  std::string capture_dir;  // empty: stagefrontier-captures in --shm-dir
  std::vector<std::string> route_flags;
  std::string log_level;
  std::vector<SidecarRoute> routes;  // parsed from route_flags by ResolveSidecarOptions

  // Where the trainers write captures.
  std::string CaptureDirectory() const;
};

// Parses the flags into *options (the durations into options->stream). Returns the exit
// status when main should end at once (--help: 0, a usage error: 2), else nullopt.
std::optional<int> ParseSidecarOptions(int argc, char** argv, SidecarOptions* options);

// Reads the token file and parses --route. The error's message is the line to log (exit 2).
absl::Status ResolveSidecarOptions(SidecarOptions* options);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIDECAR_SIDECAR_OPTIONS_H_
