#include "daemon/coordinator/coordinator_options.h"

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/accounting/probe_bracketing.h"
#include "daemon/common/command_line.h"

namespace stagefrontier {
namespace {

// Flags in other units than the options hold; converted after parsing.
struct UnitFlags {
  int64_t max_job_memory_mb = 0;
  int64_t max_memory_mb = 0;
  int64_t drain_timeout_s = 30;
  uint64_t capture_max_mb = 0;
  uint64_t capture_keep_mb = 0;
  uint64_t capture_keep_job_mb = 0;
  int64_t selftest_lease_s = 0;
};

// The add-functions below follow --help's order.
void AddServingFlags(CLI::App& app, CoordinatorOptions* o) {
  app.add_option("--listen", o->listen, "gRPC address (ingest and query)")
      ->check(ListenAddress(false))
      ->capture_default_str();
  app.add_option("--metrics-listen", o->metrics_listen,
                 "Prometheus /metrics address; empty disables")
      ->check(ListenAddress(true))
      ->capture_default_str();
  app.add_option("--http-listen", o->http_listen,
                 "serve the web view (jobs, verdicts, charts, rank health, captures) on this "
                 "IPv4 HOST:PORT; off by default. Same TLS files and token as the gRPC port")
      ->check(ListenAddress(true));
  app.add_option("--health-listen", o->health_listen,
                 "also serve gRPC health checking (grpc.health.v1) in plaintext here, for probes "
                 "that cannot speak TLS (Kubernetes grpc probes); empty: only on --listen")
      ->check(ListenAddress(true));
  app.add_option("--ingest-shards", o->ingest_shards,
                 "gRPC servers sharing --listen (SO_REUSEPORT; the kernel spreads connections "
                 "among them). Each divides Debian's debug-built gRPC's scan of a completion "
                 "queue's calls, but 4 cost 3-12% more CPU than 1 at 12,500 streams on 2 cores "
                 "(docs/results.md): for machines with many cores")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  app.add_flag("--http2-bdp-probe", o->http2_bdp_probe,
               "let gRPC probe each connection's bandwidth-delay product (a PING round trip "
               "every few messages) to grow its HTTP/2 windows past 64 KB: faster capture "
               "uploads from sidecars far away, at 16 points of a core per 12,500 sidecars "
               "(docs/results.md); off by default");
}

void AddJobFlags(CLI::App& app, CoordinatorOptions* o) {
  app.add_option("--data-dir", o->data_dir, "directory of the job journals (created if missing)")
      ->required();
  app.add_flag("--no-fsync", o->no_fsync,
               "acknowledge batches without fdatasync (faster; a machine crash may lose them)");
  app.add_option("--journal-compact-mb", o->journal_compact_mb,
                 "move a job's journal records into compact record blocks once this many MB of "
                 "plain records were written, and a quarter of the blocks' size (while "
                 "running); 0: never")
      ->check(CLI::Range(0.0, 1'000'000.0))
      ->capture_default_str();
  app.add_option("--jobs", o->jobs_csv, "comma-separated job ids to accept; default: any");
  app.add_option("--step-deadline-ms", o->deadline_ms,
                 "close a step as partial this long after its first record, once none of its "
                 "records came for a fifth of it (at most twice it); sidecars hold a step's "
                 "records at most this less 1 s (batches of up to 8 steps)")
      ->check(CLI::Range(int64_t{1}, int64_t{3'600'000}))
      ->capture_default_str();
  app.add_option("--stall-after-ms", o->stall_after_ms,
                 "a job that has not advanced for max(10 x its median step, this) is stalled "
                 "(sfctl control --stall-after-ms sets one job's own limit)")
      ->check(CLI::Range(int64_t{100}, int64_t{86'400'000}))
      ->capture_default_str();
  app.add_option("--stall-pause-alarm-ms", o->stall_pause_alarm_ms,
                 "a group-wide pause (every rank in the same non-sync stage: a checkpoint, an "
                 "evaluation) is an alarm only past this")
      ->check(CLI::Range(int64_t{100}, int64_t{86'400'000}))
      ->capture_default_str();
  app.add_option("--window-steps", o->engine.window_steps, "steps per verdict window")
      ->check(CLI::Range(2, 1'000'000))
      ->capture_default_str();
  app.add_option("--probe-bracket", o->probe_bracket,
                 "which stages may contain which collectives, e.g. "
                 "\"all_reduce:grad_sync|backward,all_gather:forward\"; default: any collective "
                 "in any sync or mixed stage (docs/probe.md)");
}

void AddSecurityFlags(CLI::App& app, CoordinatorOptions* o) {
  app.add_option("--token-file", o->token_file, "require this shared token from every client");
  app.add_option("--token-scopes-file", o->token_scopes_file,
                 "narrower tokens for sfctl and the web view, a line each: \"read TOKEN\", "
                 "\"control TOKEN\" or \"job:JOB TOKEN\" (docs/operations.md, Security)");
  app.add_option("--tls-cert", o->tls.cert, "serve TLS with this PEM certificate");
  app.add_option("--tls-key", o->tls.key, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", o->tls.ca, "require client certificates signed by this CA");
  app.add_option("--max-message-bytes", o->max_message_bytes, "largest message accepted")
      ->check(CLI::Range(1024, 1 << 30))
      ->capture_default_str();
}

// Resource limits (docs/operations.md, "Resource model").
void AddLimitFlags(CLI::App& app, CoordinatorOptions* o, UnitFlags* u) {
  ResourceLimits& limits = o->limits;
  app.add_option("--max-world-size", limits.max_world_size, "largest world size a job may declare")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  app.add_option("--max-job-memory-mb", u->max_job_memory_mb,
                 "largest estimated memory of one job (world size x stages x window)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--max-memory-mb", u->max_memory_mb,
                 "memory all jobs together may reserve; 0: three quarters of this machine's")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--max-jobs", limits.max_jobs, "jobs this coordinator holds at most")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-jobs-per-stream", limits.max_jobs_per_stream,
                 "jobs one sidecar stream may declare ranks of")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--job-retire-idle-ms", limits.job_retire_idle_ms,
                 "a job whose ranks showed no life for this long stops counting against "
                 "--max-jobs and --max-jobs-per-stream: it leaves memory when a new job needs "
                 "room (its journal stays, and it comes back if its ranks do)")
      ->check(CLI::Range(int64_t{1'000}, int64_t{30} * 86'400'000))
      ->capture_default_str();
  app.add_option("--max-streams", limits.max_streams, "concurrent sidecar streams")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  app.add_option("--hello-timeout-ms", limits.hello_timeout_ms,
                 "a stream must say Hello this soon after opening")
      ->check(CLI::Range(int64_t{10}, int64_t{3'600'000}))
      ->capture_default_str();
  app.add_option("--idle-timeout-ms", limits.idle_timeout_ms,
                 "end an ingest stream that sent nothing for this long, and close a connection "
                 "that held no call for as long (a sidecar sends at least every 4.5 s; a machine "
                 "that vanished leaves its connections half-open); 0: never")
      ->check(CLI::Range(int64_t{0}, int64_t{86'400'000}))
      ->capture_default_str();
  app.add_option("--max-stream-queue", limits.max_stream_queue,
                 "messages queued for a stream that does not read them before it is cut off")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
}

void AddNodeFlags(CLI::App& app, CoordinatorOptions* o, UnitFlags* u) {
  app.add_option("--node-metrics-max", o->node_metrics_max,
                 "per-node /metrics series for at most this many charged nodes")
      ->check(CLI::Range(int64_t{0}, int64_t{100'000}))
      ->capture_default_str();
  app.add_option("--drain-command", o->drain.command,
                 "when a node turns chronic, run this under /bin/sh -c with SF_NODE, SF_REASON... "
                 "in its environment (dry run unless --drain-execute)");
  app.add_flag("--drain-execute", o->drain.execute, "really run --drain-command (default: log it)");
  app.add_option("--drain-max-per-hour", o->drain.max_per_hour,
                 "drain at most this many nodes an hour")
      ->check(CLI::Range(0, 10'000))
      ->capture_default_str();
  app.add_option("--drain-timeout-s", u->drain_timeout_s, "kill the drain command after this long")
      ->check(CLI::Range(int64_t{1}, int64_t{3600}))
      ->capture_default_str();
}

void AddCaptureFlags(CLI::App& app, CoordinatorOptions* o, UnitFlags* u) {
  CapturePolicyOptions& c = o->capture;
  app.add_flag("--captures,!--no-captures", o->captures,
               "after a CLEAR or rank-naming AMBIGUOUS verdict, ask the suspects and reference "
               "ranks whose trainers can take captures (stagefrontier.torch, or C/C++ "
               "callbacks) to capture a profiler trace of the same future steps (on by "
               "default; --no-captures: only captures asked by hand)");
  app.add_option("--capture-steps", c.steps, "steps per capture")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--capture-references", c.references,
                 "reference ranks per capture, on other nodes where possible")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--capture-lead-seconds", c.delivery_seconds,
                 "a capture starts this far ahead at the job's step rate (at least 10 steps), "
                 "so that the request reaches every rank first")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--capture-cooldown-windows", c.cooldown_windows,
                 "verdict windows after a capture before the next one")
      ->check(CLI::Range(0, 1'000'000))
      ->capture_default_str();
  app.add_option("--capture-max-per-hour", c.max_per_hour, "captures per job and hour at most")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--capture-max-mb", u->capture_max_mb,
                 "a capture file larger than this is refused (the sidecar keeps it)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--capture-keep-mb", u->capture_keep_mb,
                 "collected capture files kept under --data-dir/captures, oldest dropped first")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30))
      ->capture_default_str();
  app.add_option("--capture-keep-files", o->store.max_files, "capture files kept at most")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  app.add_option("--capture-keep-job-mb", u->capture_keep_job_mb,
                 "capture bytes kept for one job, uploads in flight included; a job beyond it "
                 "drops its own oldest files, never another job's")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30))
      ->capture_default_str();
}

void AddSelfTestAndSweepFlags(CLI::App& app, CoordinatorOptions* o, UnitFlags* u) {
  app.add_option("--selftest-max-running", o->selftest.max_running,
                 "self-tests running at once on this coordinator (one per job at most)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--selftest-steps-per-hour", o->selftest.max_steps_per_hour,
                 "delayed steps self-tests may ask of one job per hour")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}))
      ->capture_default_str();
  app.add_option("--selftest-lease-s", u->selftest_lease_s,
                 "cancel a running self-test when nobody asked for its result this long (its "
                 "sfctl went away)")
      ->check(CLI::Range(int64_t{1}, int64_t{3600}))
      ->capture_default_str();
  app.add_option("--sweep-max-drop", o->fleet.max_drop,
                 "a node-sweep figure fails when it lies this fraction (and 4 robust SDs) below "
                 "the fleet's median; raise it on nodes that share their cores")
      ->check(CLI::Range(0.01, 0.99))
      ->capture_default_str();
}

}  // namespace

std::set<std::string> CoordinatorOptions::AllowedJobs() const {
  std::set<std::string> allowed;
  for (absl::string_view j : absl::StrSplit(jobs_csv, ',', absl::SkipEmpty())) {
    allowed.insert(std::string(j));
  }
  return allowed;
}

std::optional<int> ParseCoordinatorOptions(int argc, char** argv, CoordinatorOptions* o) {
  CLI::App app{"stagefrontier-coordinator: frontier accounting, verdicts and queries",
               "stagefrontier-coordinator"};
  // The defaults shown in --help are the options' own, in the flags' units.
  UnitFlags u;
  u.max_job_memory_mb = o->limits.max_job_memory_bytes >> 20;
  u.capture_max_mb = o->store.max_file_bytes >> 20;
  u.capture_keep_mb = o->store.max_total_bytes >> 20;
  u.capture_keep_job_mb = o->store.max_job_bytes >> 20;
  u.selftest_lease_s = o->selftest.lease_ns / 1'000'000'000;
  AddServingFlags(app, o);
  AddJobFlags(app, o);
  AddSecurityFlags(app, o);
  AddLimitFlags(app, o, &u);
  AddNodeFlags(app, o, &u);
  AddCaptureFlags(app, o, &u);
  AddSelfTestAndSweepFlags(app, o, &u);
  AddLogLevelFlag(app, &o->log_level);
  if (int rc = ParseCommandLine(app, argc, argv); rc >= 0) return rc;
  o->limits.max_job_memory_bytes = u.max_job_memory_mb << 20;
  o->limits.max_memory_bytes = u.max_memory_mb << 20;
  o->drain.timeout = std::chrono::seconds(u.drain_timeout_s);
  o->store.root = o->data_dir + "/captures";
  o->store.max_file_bytes = u.capture_max_mb << 20;
  o->store.max_total_bytes = u.capture_keep_mb << 20;
  o->store.max_job_bytes = u.capture_keep_job_mb << 20;
  o->selftest.lease_ns = u.selftest_lease_s * 1'000'000'000;
  o->fleet.path = o->data_dir + "/sweeps.ledger";
  o->fleet.fsync = !o->no_fsync;
  return std::nullopt;
}

absl::Status ValidateCoordinatorOptions(const CoordinatorOptions& o) {
  if (absl::Status s = ProbeBracketing::CheckRules(o.probe_bracket); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("--probe-bracket: ", s.message()));
  }
  return o.engine.Validate();
}

}  // namespace stagefrontier
