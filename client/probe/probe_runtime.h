// The probe inside one training process: on the first intercepted collective it reads the
// launcher environment (the same variables as the stub: job id, LOCAL_RANK, segment dir),
// opens or creates the node's segment, claims this rank's probe ring, picks the event backend
// and starts the resolver thread. If any of that fails it prints one warning and the process
// runs on with every collective forwarded untimed.
//
// Settings (environment):
//   STAGEFRONTIER_PROBE           "0" disables the probe (calls are only forwarded)
//   STAGEFRONTIER_PROBE_BACKEND   "auto" (default: CUDA if libsfprobe_cuda.so loads and a GPU
//                                 is visible, else the host clock), "cuda", "host_clock"
//   STAGEFRONTIER_PROBE_SAMPLE    "all" (default), "every:N" (one step in N), "request"
//   STAGEFRONTIER_PROBE_POLL_US   resolver period, default 500
//
//   if (CollectiveTracker* t = ProbeRuntime::Tracker()) { ... }  // null: forward only
#ifndef STAGEFRONTIER_CLIENT_PROBE_PROBE_RUNTIME_H_
#define STAGEFRONTIER_CLIENT_PROBE_PROBE_RUNTIME_H_

#include <string>

#include "absl/status/statusor.h"
#include "client/probe/collective_tracker.h"

namespace stagefrontier::probe {

// Parses STAGEFRONTIER_PROBE_SAMPLE. InvalidArgument names the bad value.
[[nodiscard]] absl::StatusOr<SamplingPolicy> ParseSamplingPolicy(const std::string& text);

class ProbeRuntime {
 public:
  // The process's tracker, started on first use; null if the probe is disabled or could not
  // start (the reason was printed once). Thread-safe.
  static CollectiveTracker* Tracker() noexcept;
  // Stops the resolver after a last poll (also run at exit). Safe to call more than once.
  static void Shutdown() noexcept;
};

}  // namespace stagefrontier::probe

#endif  // STAGEFRONTIER_CLIENT_PROBE_PROBE_RUNTIME_H_
