// FetchCapture's stream on gRPC's callback API: sends one stored capture file in chunks of at
// most kChunkBytes, each read when the previous one was written, so a download holds no thread
// while the client reads (the synchronous API held one for the whole transfer).
//
//   // in a CallbackService's FetchCapture(CallbackServerContext*, request):
//   return CaptureFileStream::Start(path, "no capture file ... of job ...");
//
// The file is opened once: a capture the store removes meanwhile (retention) is still sent
// whole. Reads happen on gRPC's callback threads (a page-cache read of 1 MiB at a time).
#ifndef STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_FILE_STREAM_H_
#define STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_FILE_STREAM_H_

#include <cstdint>
#include <string>

#include "grpcpp/grpcpp.h"
#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

class CaptureFileStream final : public grpc::ServerWriteReactor<v1::CaptureFileChunk> {
 public:
  static constexpr uint64_t kChunkBytes = 1 << 20;

  // Streams the file at `path`: chunks {offset, file_bytes, data} in order (an empty file: one
  // empty chunk), then OK. Ends with NOT_FOUND and `missing_message` when the file cannot be
  // opened, DATA_LOSS when it cannot be read to its end (shrunk or an I/O error).
  static grpc::ServerWriteReactor<v1::CaptureFileChunk>* Start(const std::string& path,
                                                               const std::string& missing_message);

  // A stream that ends at once with `status` (a refused call).
  static grpc::ServerWriteReactor<v1::CaptureFileChunk>* Refuse(grpc::Status status);

  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  CaptureFileStream(int fd, uint64_t size, std::string path);
  ~CaptureFileStream() override;
  // Reads and starts writing the next chunk, or finishes.
  void Next();

  const int fd_;
  const uint64_t size_;
  const std::string path_;
  uint64_t offset_ = 0;
  bool sent_any_ = false;
  v1::CaptureFileChunk chunk_;  // the one being written
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_CAPTURES_CAPTURE_FILE_STREAM_H_
