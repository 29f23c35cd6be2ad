// stagefrontier-sidecar: one per node. Drains the node's stub segments and streams them to
// the coordinator; relays control requests back. Does not daemonize (Slurm and systemd
// supervise it); SIGTERM flushes and exits. docs/operations.md.
#include <signal.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "daemon/common/command_line.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/host_name.h"
#include "daemon/common/termination_signals.h"
#include "daemon/sidecar/capture_uploader.h"
#include "daemon/sidecar/ingest_streamer.h"
#include "daemon/sidecar/segment_drainer.h"
#include "daemon/sidecar/sidecar_routes.h"
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
  int batch_delay_ms = 0;
  app.add_option("--batch-delay-ms", batch_delay_ms,
                 "hold records up to this long to send several steps per message (large jobs: "
                 "the coordinator's cost is per message); 0 sends at every poll")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  int health_every_ms = 2000;
  app.add_option("--health-every-ms", health_every_ms,
                 "how often each slot's health goes to the coordinator (also sent at once when "
                 "ranks first appear and when a capture answer changes)")
      ->check(CLI::Range(100, 600000))
      ->capture_default_str();
  std::vector<std::string> routes;
  app.add_option("--route", routes,
                 "JOB=ADDRESS: send job JOB's records to the coordinator at ADDRESS instead "
                 "(repeatable; one stream per coordinator); other jobs go to --coordinator");
  std::string capture_dir;
  app.add_option("--capture-dir", capture_dir,
                 "where the trainers write profiler captures, one folder per job (their "
                 "STAGEFRONTIER_CAPTURE_DIR; default: stagefrontier-captures in --shm-dir); "
                 "finished files are sent to the job's coordinator");
  AddLogLevelFlag(app, &log_level);
  if (int rc = ParseCommandLine(app, argc, argv); rc >= 0) return rc;
  ApplyLogLevel(log_level);
  so.poll_max = std::chrono::milliseconds(poll_max_ms);
  so.batch_delay = std::chrono::milliseconds(batch_delay_ms);
  so.health_every = std::chrono::milliseconds(health_every_ms);

  // Signals are taken by the main thread; block them before any thread starts.
  BlockTerminationSignals();

  absl::StatusOr<std::string> token = ReadTokenFile(token_file);
  if (!token.ok()) {
    spdlog::error("{}", std::string(token.status().message()));
    return 2;
  }
  so.token = *token;

  // One lane (drainer + stream) per coordinator: the routed jobs' own lanes, and the rest of
  // the node's segments to --coordinator.
  absl::StatusOr<std::vector<SidecarRoute>> parsed = ParseRoutes(routes);
  if (!parsed.ok()) {
    spdlog::error("--route: {}", std::string(parsed.status().message()));
    return 2;
  }
  if (!parsed->empty() && !dro.job.empty()) {
    spdlog::error(
        "--route and --job cannot be combined: --job already limits this sidecar to "
        "one job; point --coordinator at that job's coordinator instead");
    return 2;
  }
  struct Lane {
    std::string what;
    std::unique_ptr<SegmentDrainer> drainer;
    std::unique_ptr<IngestStreamer> streamer;
    std::thread run;
  };
  std::vector<Lane> lanes;
  const auto log = [](const std::string& line) { spdlog::info("{}", line); };
  const auto add_lane = [&](const DrainerOptions& d, const StreamerOptions& o,
                            const std::string& what) {
    Lane lane;
    lane.what = what;
    lane.drainer = std::make_unique<SegmentDrainer>(d, log);
    if (absl::Status s = lane.drainer->Start(); !s.ok()) {
      spdlog::error("{}", std::string(s.message()));
      return false;
    }
    lane.streamer = std::make_unique<IngestStreamer>(
        o, lane.drainer.get(), log, [](const std::string& line) { spdlog::warn("{}", line); });
    lanes.push_back(std::move(lane));
    return true;
  };
  DrainerOptions rest = dro;
  for (const SidecarRoute& r : *parsed) {
    rest.skip_jobs.insert(r.job);
    DrainerOptions d = dro;
    d.job = r.job;
    d.create_job = dro.create_job == r.job ? r.job : "";
    StreamerOptions o = so;
    o.coordinator = r.coordinator;
    if (!add_lane(d, o, "job " + r.job + " to " + r.coordinator)) return 2;
  }
  if (rest.skip_jobs.count(rest.create_job) > 0) rest.create_job.clear();
  if (!add_lane(rest, so, (parsed->empty() ? "" : "other jobs to ") + so.coordinator)) return 2;
  for (Lane& lane : lanes) {
    spdlog::info("sidecar on {} draining {}: {}", so.node, dro.dir, lane.what);
    lane.run = std::thread([&lane] { lane.streamer->Run(); });
  }
  // Capture files go to each job's coordinator on a thread and channels of their own.
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds = ChannelCredentials(so.tls);
  if (!creds.ok()) {
    spdlog::error("{}", std::string(creds.status().message()));
    return 2;
  }
  std::map<std::string, std::unique_ptr<GrpcCaptureSender>> senders;  // by coordinator
  std::map<std::string, std::string> coordinator_of;                  // routed jobs
  for (const SidecarRoute& r : *parsed) coordinator_of[r.job] = r.coordinator;
  senders[so.coordinator] = std::make_unique<GrpcCaptureSender>(so.coordinator, *creds, so.token);
  for (const SidecarRoute& r : *parsed) {
    if (senders.count(r.coordinator) == 0) {
      senders[r.coordinator] = std::make_unique<GrpcCaptureSender>(r.coordinator, *creds, so.token);
    }
  }
  CaptureUploaderOptions uo;
  uo.directory = capture_dir.empty() ? dro.dir + "/stagefrontier-captures" : capture_dir;
  uo.node = so.node;
  uo.segment_dir = dro.dir;
  uo.only_job = dro.job;
  CaptureUploader uploader(
      uo,
      [&](const std::string& job) -> CaptureSender* {
        auto it = coordinator_of.find(job);
        return senders.at(it != coordinator_of.end() ? it->second : so.coordinator).get();
      },
      log);
  std::thread uploads([&uploader] { uploader.Run(); });
  spdlog::info("sidecar on {} sends finished captures from {}", so.node, uo.directory);

  const int sig = WaitForTerminationSignal();
  spdlog::info("signal {}: flushing and exiting", sig);
  uploader.Stop();
  uploads.join();
  for (Lane& lane : lanes) lane.streamer->Stop();
  for (Lane& lane : lanes) {
    lane.run.join();
    const StreamerCounters& c = lane.streamer->counters();
    spdlog::info(
        "sidecar stopped ({}): {} records sent, {} acknowledged, {} refused by the coordinator, "
        "{} dropped as never acceptable; {} segments quarantined, {} reader errors",
        lane.what, c.records_sent.load(), c.records_acked.load(), c.records_refused.load(),
        c.records_dropped_poison.load(), lane.drainer->quarantined(),
        lane.drainer->reader_errors());
  }
  const CaptureUploader::Counters& uc = uploader.counters();
  spdlog::info(
      "captures: {} files sent ({} bytes, {} on the wire), {} refused, {} job folders refused, {} "
      "send errors, {} stale .part files removed",
      uc.files_sent.load(), uc.bytes_sent.load(), uc.wire_bytes.load(), uc.files_refused.load(),
      uc.jobs_refused.load(), uc.send_errors.load(), uc.parts_removed.load());
  return 0;
}
