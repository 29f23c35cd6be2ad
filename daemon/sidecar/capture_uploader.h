// Ships the node's finished capture files to the coordinator (proto/stagefrontier/v1/
// captures.proto): the trainers write trace_rank<R>_step<F>.json into <directory>/<job>/
// (stagefrontier.torch, capture.py); each pass sends every file not yet sent, in compressed
// chunks from the offset the coordinator acknowledges, so an upload cut by a restart of either
// side resumes where it stopped. A sent file gets a "<file>.uploaded" marker beside it, a file
// the coordinator refuses for good (too large, malformed) a "<file>.refused" marker holding the
// reason; the files themselves stay for the node's owner. A trainer's temporary file
// (<file>.<pid>.part) left for longer than `stale_part_age` (a trainer that died while
// writing) is removed, counted and logged. Runs on its own thread with its own
// channel, so it never delays the step records.
//
//   CaptureUploader uploader(options, [&](const std::string& job) { return &sender; }, log);
//   std::thread t([&] { uploader.Run(); });  ...  uploader.Stop(); t.join();
#ifndef STAGEFRONTIER_DAEMON_SIDECAR_CAPTURE_UPLOADER_H_
#define STAGEFRONTIER_DAEMON_SIDECAR_CAPTURE_UPLOADER_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/common/grpc_security.h"
#include "stagefrontier/v1/captures.grpc.pb.h"

namespace stagefrontier {

// Sends one chunk; the gRPC implementation below, a fake in tests.
class CaptureSender {
 public:
  virtual ~CaptureSender() = default;
  [[nodiscard]] virtual absl::StatusOr<v1::CaptureChunkAck> Send(const v1::CaptureChunk& chunk) = 0;
};

// Over a channel of its own to one coordinator; each call has a deadline of `timeout`.
class GrpcCaptureSender : public CaptureSender {
 public:
  GrpcCaptureSender(const std::string& coordinator, std::shared_ptr<grpc::ChannelCredentials> creds,
                    std::string token,
                    std::chrono::milliseconds timeout = std::chrono::seconds(30));
  absl::StatusOr<v1::CaptureChunkAck> Send(const v1::CaptureChunk& chunk) override;

 private:
  std::unique_ptr<v1::CaptureCollection::Stub> stub_;
  std::string token_;
  std::chrono::milliseconds timeout_;
};

struct CaptureUploaderOptions {
  std::string directory;  // the capture directory (STAGEFRONTIER_CAPTURE_DIR of the trainers)
  // The node's segment directory: a job's folder and files must belong to the user who owns
  // the job's segment there (none: to the folder's owner, as in tests).
  std::string segment_dir;
  std::string node;
  std::string only_job;  // the sidecar's --job: only that job's folder
  std::set<std::string> skip_jobs;
  uint32_t chunk_bytes = 1U << 20;
  std::chrono::milliseconds interval{1000};
  // A trace is written in seconds: a ".part" file this old belongs to a trainer that died.
  std::chrono::seconds stale_part_age{600};
};

class CaptureUploader {
 public:
  struct Counters {
    std::atomic<uint64_t> files_sent{0};
    std::atomic<uint64_t> bytes_sent{0};  // file bytes acknowledged
    std::atomic<uint64_t> wire_bytes{0};  // compressed bytes sent
    std::atomic<uint64_t> files_refused{0};
    std::atomic<uint64_t> send_errors{0};    // transient: tried again next pass
    std::atomic<uint64_t> parts_removed{0};  // stale ".part" files of dead trainers
    std::atomic<uint64_t> jobs_refused{0};   // passes that skipped a job folder (link, owner)
  };
  using SenderFor = std::function<CaptureSender*(const std::string& job)>;
  using Log = std::function<void(const std::string&)>;

  CaptureUploader(CaptureUploaderOptions options, SenderFor sender_for, Log log = nullptr);

  // One pass over the directory: sends what is not yet sent. Returns the files completed.
  int UploadPass();
  // Passes every options.interval until Stop().
  void Run();
  void Stop();

  const Counters& counters() const { return counters_; }

 private:
  // The user whose files the job's folder may send (see segment_dir); an error says why none.
  absl::StatusOr<uid_t> JobOwner(const std::string& job, int job_dir_fd);
  void RefuseJob(const std::string& job, const std::string& why);
  void LogOnce(const std::string& line);
  // Removes `name`, a trainer's temporary file, if it is older than stale_part_age.
  void RemoveIfStale(int dir_fd, const std::string& job, const std::string& name);
  // Marks `name` refused (never overwriting an entry) and says why; returns true.
  bool Refuse(int dir_fd, const std::string& job, const std::string& name, const std::string& why);
  // Sends one file; true when it is complete at the coordinator or refused for good.
  bool UploadFile(const std::string& job, int dir_fd, uid_t owner, const std::string& name,
                  CaptureSender* sender);

  CaptureUploaderOptions options_;
  SenderFor sender_for_;
  Log log_;
  Counters counters_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string last_error_;        // logged once per new error text
  std::set<std::string> logged_;  // refusals said already (LogOnce)
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIDECAR_CAPTURE_UPLOADER_H_
