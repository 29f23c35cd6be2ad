// The coordinator's command line: every flag into CoordinatorOptions (sizes in MB and times in
// seconds already converted), and the checks that need more than CLI11's per-flag ones.
// Flags, defaults and help text are documented in docs/operations.md; tests/deploy reads them
// from there.
//
//   CoordinatorOptions o;
//   if (std::optional<int> rc = ParseCoordinatorOptions(argc, argv, &o)) return *rc;
//   if (absl::Status s = ValidateCoordinatorOptions(o); !s.ok()) { log s.message(); return 2; }
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_COORDINATOR_OPTIONS_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_COORDINATOR_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "daemon/accounting/engine_config.h"
#include "daemon/captures/capture_policy.h"
#include "daemon/captures/capture_store.h"
#include "daemon/common/grpc_security.h"
#include "daemon/coordinator/resource_limits.h"
#include "daemon/coordinator/self_tests.h"
#include "daemon/nodes/drain_hook.h"
#include "daemon/sweep/fleet_baseline.h"

namespace stagefrontier {

struct CoordinatorOptions {
  // Addresses; an empty optional one is off.
  std::string listen = "127.0.0.1:7311";
  std::string metrics_listen = "127.0.0.1:7312";
  std::string health_listen;
  std::string http_listen;
  // gRPC servers sharing --listen through SO_REUSEPORT, each with its own callback completion
  // queue (1: one server, no SO_REUSEPORT).
  int ingest_shards = 1;
  // gRPC's HTTP/2 bandwidth-delay probing: a PING round trip on a connection every few of its
  // messages, to grow its flow-control windows. Off: 12,500 sidecars' pings took 16 points of
  // a core (docs/results.md); the windows stay at 64 KB, plenty for batches on a LAN.
  bool http2_bdp_probe = false;
  // Journals and ledgers.
  std::string data_dir;
  bool no_fsync = false;
  double journal_compact_mb = 64;
  // Jobs and their accounting.
  std::string jobs_csv;  // empty: any job
  int64_t deadline_ms = 10000;
  int64_t stall_after_ms = 5000;           // the stall limit's floor (stall_watch.h)
  int64_t stall_pause_alarm_ms = 300'000;  // a group-wide pause alarms past this
  EngineConfig engine;                     // --window-steps
  std::string probe_bracket;
  // Security.
  std::string token_file;
  std::string token_scopes_file;
  TlsFiles tls;
  int max_message_bytes = 16 << 20;
  // Resources, nodes, captures, self-tests, sweeps.
  ResourceLimits limits;
  int64_t node_metrics_max = 1000;
  DrainHookOptions drain;
  bool captures = true;
  CapturePolicyOptions capture;
  CaptureStoreOptions store;  // root under data_dir
  SelfTestLimits selftest;
  FleetBaselineOptions fleet;
  std::string log_level;

  // The job ids of --jobs.
  std::set<std::string> AllowedJobs() const;
};

// Parses the flags into *options. Returns the exit status when main should end at once
// (--help: 0, a usage error: 2), else nullopt.
std::optional<int> ParseCoordinatorOptions(int argc, char** argv, CoordinatorOptions* options);

// What the flags' own checks cannot see: --probe-bracket's rules and the verdict settings.
// The error's message is the line to log (exit 2).
absl::Status ValidateCoordinatorOptions(const CoordinatorOptions& options);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_COORDINATOR_OPTIONS_H_
