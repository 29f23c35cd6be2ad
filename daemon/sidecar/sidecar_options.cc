#include "daemon/sidecar/sidecar_options.h"

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "daemon/common/command_line.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/host_name.h"
#include "daemon/sidecar/batch_hold.h"

namespace stagefrontier {

std::string SidecarOptions::CaptureDirectory() const {
  return capture_dir.empty() ? drain.dir + "/stagefrontier-captures" : capture_dir;
}

std::optional<int> ParseSidecarOptions(int argc, char** argv, SidecarOptions* options) {
  CLI::App app{"stagefrontier-sidecar: drains this node's stage rings to the coordinator",
               "stagefrontier-sidecar"};
  StreamerOptions& so = options->stream;
  DrainerOptions& dro = options->drain;
  int poll_max_ms = 10;
  so.node = HostName();
  app.add_option("--coordinator", so.coordinator, "coordinator gRPC address")
      ->capture_default_str();
  app.add_option("--node", so.node, "this node's name")->capture_default_str();
  app.add_option("--shm-dir", dro.dir, "directory of the stub segments (a tmpfs)")
      ->capture_default_str();
  app.add_option("--job", dro.job, "drain only this job's segment");
  app.add_option("--create-job", dro.create_job,
                 "create this job's segment at start if the trainers have not");
  app.add_option("--slots", dro.create_slots, "slots (local ranks) of a created segment")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--ring-capacity", dro.create_ring_capacity,
                 "records per ring of a created segment (a power of two)")
      ->capture_default_str();
  app.add_option("--group", dro.group, "group owning a created segment (mode 0660)");
  app.add_option("--token-file", options->token_file, "send this shared token to the coordinator");
  app.add_option("--tls-ca", so.tls.ca, "verify the coordinator's TLS certificate with this CA");
  app.add_option("--tls-cert", so.tls.cert, "client certificate (mutual TLS)");
  app.add_option("--tls-key", so.tls.key, "client key (mutual TLS)");
  app.add_option("--poll-max-ms", poll_max_ms, "longest idle poll interval")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  int batch_delay_ms = -1;
  app.add_option("--batch-delay-ms", batch_delay_ms,
                 "hold records up to this long to send several steps per message; 0 sends at "
                 "every poll. Unset: the sidecar's own batching (a few steps per message, each "
                 "batch ending on a step all of a job's ranks here finished, held at most the "
                 "coordinator's step deadline less 1 s)")
      ->check(CLI::Range(0, 10000));
  constexpr int64_t kMs = 1'000'000;
  int health_every_ms = static_cast<int>(so.health.stalled_every_ns / kMs);
  app.add_option("--health-every-ms", health_every_ms,
                 "how often each slot's health (with each rank's open stage) goes to the "
                 "coordinator while a rank's stage has been open past --open-stage-report-ms (a "
                 "stall forming), and at most this often when the health has news (a slot "
                 "claimed or released, an owner gone, drops, a self-test answer); also sent at "
                 "once when ranks first appear, when a capture answer changes (at most every "
                 "100 ms) and when an open stage passes --open-stage-report-ms")
      ->check(CLI::Range(100, 600000))
      ->capture_default_str();
  int health_quiet_ms = static_cast<int>(so.health.quiet_after_ns / kMs);
  app.add_option("--health-quiet-ms", health_quiet_ms,
                 "otherwise, health after this long with nothing sent to the coordinator (a batch "
                 "counts). Capped at the coordinator's longest batch hold and 500 ms (9.5 s "
                 "against its 10 s step deadline) or, with a coordinator that does not say its "
                 "deadline, like --health-every-ms 250 ms under the silence limit it says after "
                 "the Hello (4.75 s), with a log line")
      ->check(CLI::Range(100, 600000))
      ->capture_default_str();
  int health_max_gap_ms = static_cast<int>(so.health.max_gap_ns / kMs);
  app.add_option("--health-max-gap-ms", health_max_gap_ms,
                 "and at least this often, batches or not (the slots' progress counters); capped "
                 "at half the coordinator's idle timeout (it says it after the Hello). A "
                 "coordinator that says nothing before its first ack (before 2026-11-28: a 3 s "
                 "silence limit) gets health after 2.5 s of silence and at least every 5 s")
      ->check(CLI::Range(100, 3600000))
      ->capture_default_str();
  int open_stage_report_ms = 1000;
  app.add_option("--open-stage-report-ms", open_stage_report_ms,
                 "send health at once, outside the period, when a rank's open stage becomes "
                 "older than this (once per open stage: a stuck rank is named sooner); 0: never")
      ->check(CLI::Range(0, 600000))
      ->capture_default_str();
  app.add_option("--route", options->route_flags,
                 "JOB=ADDRESS: send job JOB's records to the coordinator at ADDRESS instead "
                 "(repeatable; one stream per coordinator); other jobs go to --coordinator");
  app.add_option("--capture-dir", options->capture_dir,
                 "where the trainers write profiler captures, one folder per job (their "
                 "STAGEFRONTIER_CAPTURE_DIR; default: stagefrontier-captures in --shm-dir); "
                 "finished files are sent to the job's coordinator");
  AddLogLevelFlag(app, &options->log_level);
  if (int rc = ParseCommandLine(app, argc, argv); rc >= 0) return rc;
  so.poll_max = std::chrono::milliseconds(poll_max_ms);
  if (batch_delay_ms >= 0) so.batch_delay = std::chrono::milliseconds(batch_delay_ms);
  so.health.stalled_every_ns = health_every_ms * kMs;
  so.health.quiet_after_ns = health_quiet_ms * kMs;
  so.health.max_gap_ns = health_max_gap_ms * kMs;
  so.open_stage_report = std::chrono::milliseconds(open_stage_report_ms);
  // Nodes of a job end their batches on different steps (batch_hold.h).
  so.batch_hold.phase_seed = PhaseSeedFor(so.node);
  return std::nullopt;
}

absl::Status ResolveSidecarOptions(SidecarOptions* options) {
  absl::StatusOr<std::string> token = ReadTokenFile(options->token_file);
  if (!token.ok()) return token.status();
  options->stream.token = *token;
  absl::StatusOr<std::vector<SidecarRoute>> parsed = ParseRoutes(options->route_flags);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--route: ", parsed.status().message()));
  }
  if (!parsed->empty() && !options->drain.job.empty()) {
    return absl::InvalidArgumentError(
        "--route and --job cannot be combined: --job already limits this sidecar to "
        "one job; point --coordinator at that job's coordinator instead");
  }
  options->routes = *std::move(parsed);
  return absl::OkStatus();
}

}  // namespace stagefrontier
