// stagefrontier-coordinator: accepts sidecar streams, aligns steps across ranks, accounts
// them, decides verdicts, answers queries and serves /metrics. docs/operations.md.
//
// The composition root: the flags (coordinator_options.h), the process (coordinator_server.h,
// which owns the services and their start and shutdown order), the signal.
#include <signal.h>

#include <optional>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "daemon/captures/capture_analysis_child.h"
#include "daemon/common/command_line.h"
#include "daemon/common/termination_signals.h"
#include "daemon/coordinator/coordinator_options.h"
#include "daemon/coordinator/coordinator_server.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  using namespace stagefrontier;
  // A capture's analysis runs in a child process of this binary (capture_analysis_child.h).
  if (std::optional<int> rc = RunCaptureAnalysisChildIfAsked(argc, argv)) return *rc;
  // Debian's Abseil is built with assertions, which turns on absl::Mutex deadlock detection
  // (a lock graph updated at every lock gRPC takes): measurable on the ingest path of
  // thousands of streams. The project's own tests keep it on.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CoordinatorOptions options;
  if (std::optional<int> rc = ParseCoordinatorOptions(argc, argv, &options)) return *rc;
  ApplyLogLevel(options.log_level);
  // A file-size limit must make journal writes fail (and acks wait), not kill us.
  signal(SIGXFSZ, SIG_IGN);
  // Signals are taken by the main thread; block them before any thread starts.
  BlockTerminationSignals();
  if (absl::Status s = ValidateCoordinatorOptions(options); !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return 2;
  }
  CoordinatorServer server(std::move(options));
  if (absl::Status s = server.Start(); !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return 2;
  }
  const int sig = WaitForTerminationSignal();
  spdlog::info("signal {}: shutting down", sig);
  server.Shutdown();
  spdlog::info("coordinator stopped");
  return 0;
}
