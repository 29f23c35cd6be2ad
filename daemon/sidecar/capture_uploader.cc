#include "daemon/sidecar/capture_uploader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/captures/capture_compression.h"
#include "daemon/captures/capture_file_name.h"
#include "daemon/sidecar/coordinator_channel.h"
#include "shm/record_limits.h"

namespace stagefrontier {
namespace {

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<std::string> List(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) out.emplace_back(e->d_name);
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void WriteMarker(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text << "\n";
}

// Codes after which sending the same file again cannot succeed.
bool Final(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kResourceExhausted;
}

}  // namespace

GrpcCaptureSender::GrpcCaptureSender(const std::string& coordinator,
                                     std::shared_ptr<grpc::ChannelCredentials> creds,
                                     std::string token, std::chrono::milliseconds timeout)
    : stub_(v1::CaptureCollection::NewStub(
          CoordinatorChannel(CoordinatorChannelOptions{.target = coordinator}, creds))),
      token_(std::move(token)),
      timeout_(timeout) {}

absl::StatusOr<v1::CaptureChunkAck> GrpcCaptureSender::Send(const v1::CaptureChunk& chunk) {
  grpc::ClientContext context;
  AttachToken(&context, token_);
  context.set_deadline(std::chrono::system_clock::now() + timeout_);
  v1::CaptureChunkAck ack;
  const grpc::Status s = stub_->Upload(&context, chunk, &ack);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  return ack;
}

CaptureUploader::CaptureUploader(CaptureUploaderOptions options, SenderFor sender_for, Log log)
    : options_(std::move(options)), sender_for_(std::move(sender_for)), log_(std::move(log)) {}

int CaptureUploader::UploadPass() {
  int completed = 0;
  for (const std::string& job : List(options_.directory)) {
    if (!shm::ValidJobId(job) || options_.skip_jobs.count(job) > 0 ||
        (!options_.only_job.empty() && job != options_.only_job)) {
      continue;
    }
    const std::string dir = absl::StrCat(options_.directory, "/", job);
    CaptureSender* sender = sender_for_(job);
    if (sender == nullptr) continue;
    for (const std::string& name : List(dir)) {
      if (IsCapturePartFileName(name)) RemoveIfStale(absl::StrCat(dir, "/", name));
      if (!ParseCaptureFileName(name)) continue;
      const std::string path = absl::StrCat(dir, "/", name);
      if (Exists(path + ".uploaded") || Exists(path + ".refused")) continue;
      if (!UploadFile(job, dir, name, sender)) break;  // its coordinator is away: next job
      ++completed;
    }
  }
  return completed;
}

void CaptureUploader::RemoveIfStale(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  const auto age =
      std::chrono::system_clock::now() - std::chrono::system_clock::from_time_t(st.st_mtime);
  if (age < options_.stale_part_age) return;
  if (::unlink(path.c_str()) != 0) return;  // not ours to remove (permissions): left alone
  ++counters_.parts_removed;
  if (log_) {
    log_(absl::StrCat("removed ", path, ": a capture left half-written for ",
                      std::chrono::duration_cast<std::chrono::seconds>(age).count(),
                      " s (its trainer died while writing it)"));
  }
}

bool CaptureUploader::UploadFile(const std::string& job, const std::string& dir,
                                 const std::string& name, CaptureSender* sender) {
  const std::string path = absl::StrCat(dir, "/", name);
  // A trainer must not make the sidecar send a file of its choosing: no symbolic link, only a
  // regular file (O_NOFOLLOW, then the type of what was opened).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat st {};
  if (fd < 0 && errno == ELOOP) {
    WriteMarker(path + ".refused", "a symbolic link, not a capture file: not sent");
    ++counters_.files_refused;
    if (log_) log_(absl::StrCat("capture ", name, " of job ", job, ": a symbolic link, not sent"));
    return true;
  }
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    if (fd >= 0) ::close(fd);
    return true;  // gone since the listing: nothing to send
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    WriteMarker(path + ".refused", "not a regular file: not sent");
    ++counters_.files_refused;
    if (log_) log_(absl::StrCat("capture ", name, " of job ", job, ": not a regular file"));
    return true;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  v1::CaptureChunk chunk;
  chunk.set_job(job);
  chunk.set_node(options_.node);
  chunk.set_file_name(name);
  chunk.set_file_bytes(size);
  std::string raw;
  uint64_t offset = 0;
  bool finished = false;
  // Each round moves the offset forward or ends; the bound only guards against a coordinator
  // that keeps answering the same offset.
  for (uint64_t round = 0; round < size / options_.chunk_bytes + 8 && !finished; ++round) {
    const uint64_t n = std::min<uint64_t>(options_.chunk_bytes, size - offset);
    raw.resize(n);
    const ssize_t got = n == 0 ? 0 : ::pread(fd, raw.data(), n, static_cast<off_t>(offset));
    if (got != static_cast<ssize_t>(n)) break;  // the file shrank: try again next pass
    chunk.set_offset(offset);
    chunk.set_raw_bytes(static_cast<uint32_t>(n));
    chunk.set_data(DeflateChunk(raw));
    absl::StatusOr<v1::CaptureChunkAck> ack = sender->Send(chunk);
    if (!ack.ok()) {
      const std::string why =
          absl::StrCat("capture ", name, " of job ", job, ": ", ack.status().message());
      if (Final(ack.status().code())) {
        WriteMarker(path + ".refused", std::string(ack.status().message()));
        ++counters_.files_refused;
        if (log_) log_(absl::StrCat(why, " (not sent again)"));
        ::close(fd);
        return true;
      }
      ++counters_.send_errors;
      if (log_ && why != last_error_) log_(absl::StrCat(why, " (tried again later)"));
      last_error_ = why;
      ::close(fd);
      return false;
    }
    counters_.wire_bytes += chunk.data().size();
    if (ack->complete()) {
      finished = true;
    } else if (ack->next_offset() > size) {
      break;
    } else {
      offset = ack->next_offset();
    }
  }
  ::close(fd);
  if (!finished) return false;
  WriteMarker(path + ".uploaded", absl::StrCat(size));
  ++counters_.files_sent;
  counters_.bytes_sent += size;
  if (log_) log_(absl::StrCat("capture ", name, " of job ", job, " sent (", size, " bytes)"));
  return true;
}

void CaptureUploader::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    UploadPass();
    lock.lock();
    cv_.wait_for(lock, options_.interval, [this] { return stop_; });
  }
}

void CaptureUploader::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = true;
  cv_.notify_all();
}

}  // namespace stagefrontier
