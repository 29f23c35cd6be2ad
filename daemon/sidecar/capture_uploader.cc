#include "daemon/sidecar/capture_uploader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/captures/capture_compression.h"
#include "daemon/captures/capture_file_name.h"
#include "daemon/common/untrusted_dir.h"
#include "daemon/sidecar/coordinator_channel.h"
#include "shm/record_limits.h"
#include "shm/segment_file.h"

namespace stagefrontier {
namespace {

// Never truncates and never follows a link: a marker already there (whoever made it) stands.
void WriteMarker(int dir_fd, const std::string& name, const std::string& text) {
  (void)CreateExclusive(dir_fd, name, text + "\n");
}

// Codes after which sending the same file again cannot succeed.
// (PermissionDenied: the coordinator asked no such capture.)
bool Final(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument ||
         code == absl::StatusCode::kResourceExhausted ||
         code == absl::StatusCode::kPermissionDenied;
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
  // The capture directory and everything in it may be the trainers' to write: every name is
  // opened below a directory fd without following links (untrusted_dir.h).
  absl::StatusOr<UniqueFd> root = OpenDirectoryNoFollow(options_.directory);
  if (!root.ok()) {
    if (!absl::IsNotFound(root.status())) LogOnce(std::string(root.status().message()));
    return 0;
  }
  int completed = 0;
  for (const std::string& job : ListDirectory(root->get())) {
    if (!shm::ValidJobId(job) || options_.skip_jobs.count(job) > 0 ||
        (!options_.only_job.empty() && job != options_.only_job)) {
      continue;
    }
    absl::StatusOr<UniqueFd> dir = OpenSubdirectoryNoFollow(root->get(), job);
    if (!dir.ok()) {
      if (!absl::IsNotFound(dir.status())) {
        RefuseJob(job, absl::StrCat("its folder ", dir.status().message(), ": nothing sent"));
      }
      continue;
    }
    absl::StatusOr<uid_t> owner = JobOwner(job, dir->get());
    if (!owner.ok()) {
      RefuseJob(job, std::string(owner.status().message()));
      continue;
    }
    CaptureSender* sender = sender_for_(job);
    if (sender == nullptr) continue;
    for (const std::string& name : ListDirectory(dir->get())) {
      if (IsCapturePartFileName(name)) RemoveIfStale(dir->get(), job, name);
      if (!ParseCaptureFileName(name)) continue;
      if (EntryExists(dir->get(), name + ".uploaded") ||
          EntryExists(dir->get(), name + ".refused")) {
        continue;
      }
      if (!UploadFile(job, dir->get(), *owner, name, sender)) break;  // coordinator away: next job
      ++completed;
    }
  }
  return completed;
}

absl::StatusOr<uid_t> CaptureUploader::JobOwner(const std::string& job, int job_dir_fd) {
  struct stat dir_st {};
  if (::fstat(job_dir_fd, &dir_st) != 0) return absl::UnavailableError("cannot stat its folder");
  if (options_.segment_dir.empty()) return dir_st.st_uid;
  // The job's trainers are whoever owns its segment: its capture folder must be theirs.
  const std::string segment = shm::SegmentPath(options_.segment_dir, job);
  struct stat seg_st {};
  if (::lstat(segment.c_str(), &seg_st) != 0 || !S_ISREG(seg_st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("no segment ", segment, " on this node: its captures are not sent"));
  }
  // A segment this sidecar made itself (--create-job: the sidecar starts before the trainers)
  // says nothing of the trainers' user: their folder's owner is then the job's user, and only
  // that user's own files are sent (a hard link to another's file is not theirs).
  if (seg_st.st_uid == ::geteuid()) return dir_st.st_uid;
  if (seg_st.st_uid != dir_st.st_uid) {
    return absl::PermissionDeniedError(absl::StrCat("its capture folder belongs to uid ",
                                                    dir_st.st_uid, ", its segment to uid ",
                                                    seg_st.st_uid, ": nothing sent"));
  }
  return dir_st.st_uid;
}

void CaptureUploader::RefuseJob(const std::string& job, const std::string& why) {
  ++counters_.jobs_refused;
  LogOnce(absl::StrCat("captures of job ", job, ": ", why));
}

void CaptureUploader::LogOnce(const std::string& line) {
  if (log_ && logged_.insert(line).second) log_(line);
  if (logged_.size() > 1000) logged_.clear();  // bounded; a line may then be said again
}

void CaptureUploader::RemoveIfStale(int dir_fd, const std::string& job, const std::string& name) {
  absl::StatusOr<struct stat> st = StatNoFollow(dir_fd, name);
  if (!st.ok()) return;
  const auto age =
      std::chrono::system_clock::now() - std::chrono::system_clock::from_time_t(st->st_mtime);
  if (age < options_.stale_part_age) return;
  if (::unlinkat(dir_fd, name.c_str(), 0) != 0) return;  // not ours to remove: left alone
  ++counters_.parts_removed;
  if (log_) {
    log_(absl::StrCat("removed ", options_.directory, "/", job, "/", name,
                      ": a capture left half-written for ",
                      std::chrono::duration_cast<std::chrono::seconds>(age).count(),
                      " s (its trainer died while writing it)"));
  }
}

bool CaptureUploader::Refuse(int dir_fd, const std::string& job, const std::string& name,
                             const std::string& why) {
  WriteMarker(dir_fd, name + ".refused", why);
  ++counters_.files_refused;
  if (log_) log_(absl::StrCat("capture ", name, " of job ", job, ": ", why));
  return true;
}

bool CaptureUploader::UploadFile(const std::string& job, int dir_fd, uid_t owner,
                                 const std::string& name, CaptureSender* sender) {
  // A trainer must not make the sidecar send a file of its choosing: no symbolic link, only a
  // regular file of the job's own user (a hard link to someone else's file is not theirs).
  absl::StatusOr<UniqueFd> file = OpenFileNoFollow(dir_fd, name);
  if (!file.ok()) {
    if (absl::IsFailedPrecondition(file.status())) {
      return Refuse(dir_fd, job, name, "a symbolic link, not a capture file: not sent");
    }
    return true;  // gone since the listing: nothing to send
  }
  const int fd = file->get();
  struct stat st {};
  if (::fstat(fd, &st) != 0) return true;
  if (!S_ISREG(st.st_mode)) return Refuse(dir_fd, job, name, "not a regular file: not sent");
  if (st.st_uid != owner) {
    return Refuse(dir_fd, job, name,
                  absl::StrCat("owned by uid ", st.st_uid, ", not by the job's user (uid ", owner,
                               "): not sent"));
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
      if (Final(ack.status().code())) {
        Refuse(dir_fd, job, name, std::string(ack.status().message()));
        return true;
      }
      const std::string why =
          absl::StrCat("capture ", name, " of job ", job, ": ", ack.status().message());
      ++counters_.send_errors;
      if (log_ && why != last_error_) log_(absl::StrCat(why, " (tried again later)"));
      last_error_ = why;
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
  if (!finished) return false;
  WriteMarker(dir_fd, name + ".uploaded", absl::StrCat(size));
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
