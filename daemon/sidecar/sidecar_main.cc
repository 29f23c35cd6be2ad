// stagefrontier-sidecar: one per node. Drains the node's stub segments and streams them to
// the coordinator; relays control requests back. Does not daemonize (Slurm and systemd
// supervise it); SIGTERM flushes and exits. docs/operations.md.
//
// The composition root: the flags (sidecar_options.h), the process (sidecar.h), the signal.
#include <optional>
#include <string>

#include "daemon/common/command_line.h"
#include "daemon/common/termination_signals.h"
#include "daemon/sidecar/sidecar.h"
#include "daemon/sidecar/sidecar_options.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  using namespace stagefrontier;
  SidecarOptions options;
  if (std::optional<int> rc = ParseSidecarOptions(argc, argv, &options)) return *rc;
  ApplyLogLevel(options.log_level);
  // Signals are taken by the main thread; block them before any thread starts.
  BlockTerminationSignals();
  if (absl::Status s = ResolveSidecarOptions(&options); !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return 2;
  }
  Sidecar sidecar(std::move(options));
  if (absl::Status s = sidecar.Start(); !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return 2;
  }
  const int sig = WaitForTerminationSignal();
  spdlog::info("signal {}: flushing and exiting", sig);
  sidecar.Shutdown();
  return 0;
}
