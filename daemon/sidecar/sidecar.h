// The sidecar process, less its command line: one lane (segment drainer + ingest stream) per
// coordinator, and the capture uploader, each on a thread of its own. Start() brings them up;
// Shutdown() stops them in order and logs what each sent.
//
//   Sidecar sidecar(options);  // options from ParseSidecarOptions + ResolveSidecarOptions
//   if (absl::Status s = sidecar.Start(); !s.ok()) { log s.message(); return 2; }
//   WaitForTerminationSignal();
//   sidecar.Shutdown();
#ifndef STAGEFRONTIER_DAEMON_SIDECAR_SIDECAR_H_
#define STAGEFRONTIER_DAEMON_SIDECAR_SIDECAR_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "daemon/sidecar/capture_uploader.h"
#include "daemon/sidecar/ingest_streamer.h"
#include "daemon/sidecar/segment_drainer.h"
#include "daemon/sidecar/sidecar_options.h"

namespace stagefrontier {

class Sidecar {
 public:
  explicit Sidecar(SidecarOptions options);
  ~Sidecar();  // Shutdown() unless done
  Sidecar(const Sidecar&) = delete;
  Sidecar& operator=(const Sidecar&) = delete;

  // Opens every lane's drainer, starts the lanes' streams and the capture uploads. The
  // error's message is the line to log.
  absl::Status Start();
  // Uploads first (their files stay for the next sidecar), then the streams, which flush what
  // is left and wait a bounded time for the last acknowledgements.
  void Shutdown();

 private:
  // A drainer and its stream to one coordinator.
  struct Lane {
    std::string what;  // for the log: which jobs, to where
    std::unique_ptr<SegmentDrainer> drainer;
    std::unique_ptr<IngestStreamer> streamer;
    std::thread run;
  };
  absl::Status AddLane(const DrainerOptions& drain, const StreamerOptions& stream,
                       const std::string& what);
  // One lane per routed job, and one for the rest of the node's segments to --coordinator.
  absl::Status AddLanes();
  void StartCaptureUploads(const std::shared_ptr<grpc::ChannelCredentials>& creds);
  void LogCounters() const;

  SidecarOptions options_;
  std::vector<Lane> lanes_;
  std::map<std::string, std::unique_ptr<GrpcCaptureSender>> senders_;  // by coordinator
  std::map<std::string, std::string> coordinator_of_;                  // routed jobs
  std::unique_ptr<CaptureUploader> uploader_;
  std::thread uploads_;
  bool started_ = false;  // the lanes' threads run
  bool shut_down_ = false;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIDECAR_SIDECAR_H_
