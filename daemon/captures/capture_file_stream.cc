#include "daemon/captures/capture_file_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/refused_stream.h"

namespace stagefrontier {

grpc::ServerWriteReactor<v1::CaptureFileChunk>* CaptureFileStream::Start(
    const std::string& path, const std::string& missing_message) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (fd >= 0) ::close(fd);
    return Refuse(grpc::Status(grpc::NOT_FOUND, missing_message));
  }
  auto* stream = new CaptureFileStream(fd, static_cast<uint64_t>(st.st_size), path);
  stream->Next();  // held until gRPC binds the reactor: no reaction runs before we return
  return stream;
}

grpc::ServerWriteReactor<v1::CaptureFileChunk>* CaptureFileStream::Refuse(grpc::Status status) {
  return RefuseStream<grpc::ServerWriteReactor<v1::CaptureFileChunk>>(std::move(status));
}

CaptureFileStream::CaptureFileStream(int fd, uint64_t size, std::string path)
    : fd_(fd), size_(size), path_(std::move(path)) {}

CaptureFileStream::~CaptureFileStream() { ::close(fd_); }

void CaptureFileStream::Next() {
  if (sent_any_ && offset_ >= size_) {
    Finish(grpc::Status::OK);
    return;
  }
  std::string* data = chunk_.mutable_data();
  data->resize(static_cast<size_t>(std::min(kChunkBytes, size_ - offset_)));
  size_t got = 0;
  while (got < data->size()) {
    const ssize_t n =
        ::pread(fd_, data->data() + got, data->size() - got, static_cast<off_t>(offset_ + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Finish(grpc::Status(
          grpc::DATA_LOSS,
          absl::StrCat("capture file ", path_, " could not be read at byte ", offset_ + got, " of ",
                       size_, ": ", n < 0 ? std::strerror(errno) : "it shrank")));
      return;
    }
    got += static_cast<size_t>(n);
  }
  chunk_.set_offset(offset_);
  chunk_.set_file_bytes(size_);
  offset_ += got;
  sent_any_ = true;
  StartWrite(&chunk_);
}

void CaptureFileStream::OnWriteDone(bool ok) {
  if (!ok) {
    Finish(grpc::Status(grpc::CANCELLED, "the client went away"));
    return;
  }
  Next();
}

void CaptureFileStream::OnDone() { delete this; }

}  // namespace stagefrontier
