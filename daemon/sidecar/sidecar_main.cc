// stagefrontier-sidecar: one per node. Drains the node's stub segments and streams them to
// the coordinator; relays control requests back. Does not daemonize (Slurm and systemd
// supervise it); SIGTERM flushes and exits. docs/operations.md.
#include <signal.h>

#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "daemon/common/command_line.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/host_name.h"
#include "daemon/common/termination_signals.h"
#include "daemon/sidecar/ingest_streamer.h"
#include "daemon/sidecar/segment_drainer.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  using namespace stagefrontier;
  CLI::App app{"stagefrontier-sidecar: drains this node's stage rings to the coordinator",
               "stagefrontier-sidecar"};
  StreamerOptions so;
  DrainerOptions dro;
  std::string token_file;
  int poll_max_ms = 10;
  std::string log_level;
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
  app.add_option("--token-file", token_file, "send this shared token to the coordinator");
  app.add_option("--tls-ca", so.tls.ca, "verify the coordinator's TLS certificate with this CA");
  app.add_option("--tls-cert", so.tls.cert, "client certificate (mutual TLS)");
  app.add_option("--tls-key", so.tls.key, "client key (mutual TLS)");
  app.add_option("--poll-max-ms", poll_max_ms, "longest idle poll interval")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  AddLogLevelFlag(app, &log_level);
  if (int rc = ParseCommandLine(app, argc, argv); rc >= 0) return rc;
  ApplyLogLevel(log_level);
  so.poll_max = std::chrono::milliseconds(poll_max_ms);

  // Signals are taken by the main thread; block them before any thread starts.
  BlockTerminationSignals();

  absl::StatusOr<std::string> token = ReadTokenFile(token_file);
  if (!token.ok()) {
    spdlog::error("{}", std::string(token.status().message()));
    return 2;
  }
  so.token = *token;
  const auto log = [](const std::string& line) { spdlog::info("{}", line); };
  SegmentDrainer drainer(dro, log);
  if (absl::Status s = drainer.Start(); !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    return 2;
  }
  IngestStreamer streamer(so, &drainer, log);
  spdlog::info("sidecar on {} draining {} to {}", so.node, dro.dir, so.coordinator);
  std::thread run([&] { streamer.Run(); });
  const int sig = WaitForTerminationSignal();
  spdlog::info("signal {}: flushing and exiting", sig);
  streamer.Stop();
  run.join();
  const StreamerCounters& c = streamer.counters();
  spdlog::info(
      "sidecar stopped: {} records sent, {} acknowledged, {} refused by the coordinator, {} "
      "dropped as never acceptable; {} segments quarantined, {} reader errors",
      c.records_sent.load(), c.records_acked.load(), c.records_refused.load(),
      c.records_dropped_poison.load(), drainer.quarantined(), drainer.reader_errors());
  return 0;
}
