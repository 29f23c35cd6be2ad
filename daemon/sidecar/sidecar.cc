#include "daemon/sidecar/sidecar.h"

#include <utility>

#include "daemon/common/grpc_security.h"
#include "spdlog/spdlog.h"

namespace stagefrontier {
namespace {

void LogInfo(const std::string& line) { spdlog::info("{}", line); }
void LogWarn(const std::string& line) { spdlog::warn("{}", line); }

}  // namespace

Sidecar::Sidecar(SidecarOptions options) : options_(std::move(options)) {}

Sidecar::~Sidecar() { Shutdown(); }

absl::Status Sidecar::Start() {
  if (absl::Status s = AddLanes(); !s.ok()) return s;
  // Checked before any thread starts, so that a bad TLS file ends the process cleanly.
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      ChannelCredentials(options_.stream.tls);
  if (!creds.ok()) return creds.status();
  for (Lane& lane : lanes_) {
    spdlog::info("sidecar on {} draining {}: {}", options_.stream.node, options_.drain.dir,
                 lane.what);
    lane.run = std::thread([&lane] { lane.streamer->Run(); });
  }
  started_ = true;
  StartCaptureUploads(*creds);
  return absl::OkStatus();
}

absl::Status Sidecar::AddLane(const DrainerOptions& drain, const StreamerOptions& stream,
                              const std::string& what) {
  Lane lane;
  lane.what = what;
  lane.drainer = std::make_unique<SegmentDrainer>(drain, LogInfo);
  if (absl::Status s = lane.drainer->Start(); !s.ok()) return s;
  lane.streamer = std::make_unique<IngestStreamer>(stream, lane.drainer.get(), LogInfo, LogWarn);
  lanes_.push_back(std::move(lane));
  return absl::OkStatus();
}

absl::Status Sidecar::AddLanes() {
  const DrainerOptions& dro = options_.drain;
  const StreamerOptions& so = options_.stream;
  DrainerOptions rest = dro;
  for (const SidecarRoute& r : options_.routes) {
    rest.skip_jobs.insert(r.job);
    DrainerOptions d = dro;
    d.job = r.job;
    d.create_job = dro.create_job == r.job ? r.job : "";
    StreamerOptions o = so;
    o.coordinator = r.coordinator;
    if (absl::Status s = AddLane(d, o, "job " + r.job + " to " + r.coordinator); !s.ok()) {
      return s;
    }
  }
  if (rest.skip_jobs.count(rest.create_job) > 0) rest.create_job.clear();
  return AddLane(rest, so, (options_.routes.empty() ? "" : "other jobs to ") + so.coordinator);
}

void Sidecar::StartCaptureUploads(const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  // Capture files go to each job's coordinator on a thread and channels of their own.
  const StreamerOptions& so = options_.stream;
  for (const SidecarRoute& r : options_.routes) coordinator_of_[r.job] = r.coordinator;
  senders_[so.coordinator] = std::make_unique<GrpcCaptureSender>(so.coordinator, creds, so.token);
  for (const SidecarRoute& r : options_.routes) {
    if (senders_.count(r.coordinator) == 0) {
      senders_[r.coordinator] = std::make_unique<GrpcCaptureSender>(r.coordinator, creds, so.token);
    }
  }
  CaptureUploaderOptions uo;
  uo.directory = options_.CaptureDirectory();
  uo.node = so.node;
  uo.segment_dir = options_.drain.dir;
  uo.only_job = options_.drain.job;
  uploader_ = std::make_unique<CaptureUploader>(
      uo,
      [this](const std::string& job) -> CaptureSender* {
        auto it = coordinator_of_.find(job);
        return senders_.at(it != coordinator_of_.end() ? it->second : options_.stream.coordinator)
            .get();
      },
      LogInfo);
  uploads_ = std::thread([this] { uploader_->Run(); });
  spdlog::info("sidecar on {} sends finished captures from {}", so.node, uo.directory);
}

void Sidecar::Shutdown() {
  if (!started_ || shut_down_) return;
  shut_down_ = true;
  // 1. Capture uploads: a file cut short is sent again by the next sidecar.
  if (uploader_ != nullptr) uploader_->Stop();
  if (uploads_.joinable()) uploads_.join();
  // 2. Every stream at once (each has its own grace for the last acknowledgements), then
  //    wait for all.
  for (Lane& lane : lanes_) lane.streamer->Stop();
  for (Lane& lane : lanes_) {
    if (lane.run.joinable()) lane.run.join();
  }
  LogCounters();
}

void Sidecar::LogCounters() const {
  for (const Lane& lane : lanes_) {
    if (!lane.streamer) continue;
    const StreamerCounters& c = lane.streamer->counters();
    spdlog::info(
        "sidecar stopped ({}): {} records sent in {} batches, {} acknowledged, {} refused by the "
        "coordinator, {} dropped as never acceptable; health {} times alone, {} riding a batch; "
        "{} segments quarantined, {} reader errors",
        lane.what, c.records_sent.load(), c.batches_sent.load(), c.records_acked.load(),
        c.records_refused.load(), c.records_dropped_poison.load(), c.health_sent.load(),
        c.health_riding.load(), lane.drainer->quarantined(), lane.drainer->reader_errors());
  }
  if (uploader_ == nullptr) return;
  const CaptureUploader::Counters& uc = uploader_->counters();
  spdlog::info(
      "captures: {} files sent ({} bytes, {} on the wire), {} refused, {} job folders refused, {} "
      "send errors, {} stale .part files removed",
      uc.files_sent.load(), uc.bytes_sent.load(), uc.wire_bytes.load(), uc.files_refused.load(),
      uc.jobs_refused.load(), uc.send_errors.load(), uc.parts_removed.load());
}

}  // namespace stagefrontier
