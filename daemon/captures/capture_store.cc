#include "daemon/captures/capture_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>

#include "absl/strings/str_cat.h"
#include "daemon/captures/capture_compression.h"
#include "daemon/captures/capture_file_name.h"
#include "daemon/common/fd_io.h"
#include "shm/record_limits.h"

namespace stagefrontier {
namespace {

absl::Status MakeDirectory(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("cannot create directory ", path, ": ", std::strerror(errno)));
}

// The size of `path`, or -1 when it does not exist.
int64_t FileSize(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_size);
}

absl::Status WriteAll(const std::string& path, const std::string& data, int64_t keep_size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  if (const int error = WriteFully(fd, data); error != 0) {
    // Back to what was acknowledged, so that the sender's resend lines up.
    (void)!::ftruncate(fd, keep_size);
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
  }
  ::close(fd);
  return absl::OkStatus();
}

}  // namespace

CaptureStore::CaptureStore(CaptureStoreOptions options) : options_(std::move(options)) {}

absl::Status CaptureStore::Open() {
  if (absl::Status s = MakeDirectory(options_.root); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  // Uploads cut by a restart resume; until their next chunk says more, they reserve what they
  // hold.
  for (const PartFile& f : PartFilesLocked()) {
    if (!S_ISREG(f.st.st_mode)) continue;
    const uint64_t size = static_cast<uint64_t>(f.st.st_size);
    uploads_[f.path] = Upload{f.job, "", size, size};
  }
  return absl::OkStatus();
}

std::vector<CaptureStore::PartFile> CaptureStore::PartFilesLocked() const {
  std::vector<PartFile> out;
  for (const std::string& j : Jobs("")) {
    const std::string dir = absl::StrCat(options_.root, "/", j);
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    while (const dirent* e = ::readdir(d)) {
      std::string_view name = e->d_name;
      if (!name.ends_with(".part") || !ParseCaptureFileName(name.substr(0, name.size() - 5))) {
        continue;
      }
      PartFile f{j, absl::StrCat(dir, "/", e->d_name), {}};
      if (::lstat(f.path.c_str(), &f.st) == 0) out.push_back(std::move(f));
    }
    ::closedir(d);
  }
  return out;
}

absl::Status CaptureStore::AdmitLocked(const v1::CaptureChunk& chunk, const std::string& what) {
  const uint64_t bytes = chunk.file_bytes();
  if (bytes > options_.max_job_bytes || bytes > options_.max_total_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " is ", bytes, " bytes, more than the capture store keeps for one job (",
                     std::min(options_.max_job_bytes, options_.max_total_bytes), ")"));
  }
  int of_job = 0, of_node = 0;
  for (const auto& [path, u] : uploads_) {
    of_job += u.job == chunk.job();
    of_node += !chunk.node().empty() && u.node == chunk.node();
  }
  if (of_job >= options_.max_uploads_per_job) {
    return absl::UnavailableError(absl::StrCat(what, ": job ", chunk.job(), " has ", of_job,
                                               " uploads in flight already (the limit); later"));
  }
  if (of_node >= options_.max_uploads_per_node) {
    return absl::UnavailableError(absl::StrCat(what, ": node ", chunk.node().substr(0, 80), " has ",
                                               of_node,
                                               " uploads in flight already (the limit); later"));
  }
  if (!EnforceRetentionLocked(chunk.job(), "", bytes)) {
    return absl::UnavailableError(absl::StrCat(
        what, ": no room for its ", bytes, " bytes beside the files and uploads in flight (",
        options_.max_total_bytes, " bytes in all, ", options_.max_job_bytes, " per job); later"));
  }
  return absl::OkStatus();
}

absl::Status CaptureStore::CheckChunkLocked(const v1::CaptureChunk& chunk,
                                            const std::optional<CaptureFileName>& name, bool asked,
                                            std::string* what_out) {
  if (!shm::ValidJobId(chunk.job())) {
    return absl::InvalidArgumentError(
        absl::StrCat("capture chunk: job \"", chunk.job().substr(0, 80),
                     "\" is not a job id (1-63 of [A-Za-z0-9_.-], not starting with '.')"));
  }
  if (!name) {
    return absl::InvalidArgumentError(
        absl::StrCat("capture chunk: file name \"", chunk.file_name().substr(0, 80),
                     "\" is not trace_rank<R>_step<F>.json, stacks_rank<R>_capture<ID>.txt or "
                     "flightrec_rank<R>_capture<ID>.json"));
  }
  std::string& what = *what_out;
  what = absl::StrCat("capture ", chunk.file_name(), " of job ", chunk.job());
  if (!asked) {
    ++counters_.refused_not_asked;
    return absl::PermissionDeniedError(absl::StrCat(what,
                                                    ": this coordinator asked no capture of rank ",
                                                    name->rank, " from step ", name->first_step));
  }
  if (chunk.file_bytes() > options_.max_file_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, " is ", chunk.file_bytes(), " bytes, over the coordinator's limit of ",
                     options_.max_file_bytes, " (--capture-max-mb)"));
  }
  if (chunk.raw_bytes() > options_.max_chunk_bytes ||
      (chunk.raw_bytes() == 0 && chunk.file_bytes() != 0) || chunk.offset() > chunk.file_bytes() ||
      chunk.raw_bytes() > chunk.file_bytes() - chunk.offset()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": a chunk of ", chunk.raw_bytes(), " bytes at offset ", chunk.offset(),
                     " does not fit a file of ", chunk.file_bytes(), " bytes (chunks hold 1..",
                     options_.max_chunk_bytes, " bytes)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::CaptureChunkAck> CaptureStore::Accept(const v1::CaptureChunk& chunk) {
  StoredCapture done;
  v1::CaptureChunkAck ack;
  const std::optional<CaptureFileName> name = ParseCaptureFileName(chunk.file_name());
  // Asked outside the store's lock: the answer comes from the capture policy's own.
  const bool asked =
      !expected_ || !name || !shm::ValidJobId(chunk.job()) || expected_(chunk.job(), *name);
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto refuse = [&](absl::Status s) {
      ++counters_.refused;
      return s;
    };
    std::string what;  // "capture FILE of job JOB", once the two are known to be valid
    if (absl::Status s = CheckChunkLocked(chunk, name, asked, &what); !s.ok()) return refuse(s);
    const std::string dir = absl::StrCat(options_.root, "/", chunk.job());
    const std::string path = absl::StrCat(dir, "/", chunk.file_name());
    const std::string part = path + ".part";
    const int64_t final_size = FileSize(path);
    if (final_size >= 0) {
      // Sent again after an ack that was lost: the file is already here.
      ack.set_next_offset(static_cast<uint64_t>(final_size));
      ack.set_complete(static_cast<uint64_t>(final_size) == chunk.file_bytes());
      return ack;
    }
    const int64_t held = std::max<int64_t>(0, FileSize(part));
    if (chunk.offset() != static_cast<uint64_t>(held)) {
      ack.set_next_offset(static_cast<uint64_t>(held));
      return ack;
    }
    auto upload = uploads_.find(part);
    if (upload == uploads_.end() || upload->second.declared < chunk.file_bytes()) {
      // A new upload (or one that now says it is larger): admitted against the bounds first.
      if (upload != uploads_.end()) uploads_.erase(upload);
      if (absl::Status s = AdmitLocked(chunk, what); !s.ok()) {
        if (absl::IsUnavailable(s)) ++counters_.refused_busy;  // at a bound: sent again later
        return refuse(s);
      }
    }
    absl::StatusOr<std::string> raw = InflateChunk(chunk.data(), chunk.raw_bytes());
    if (!raw.ok()) {
      return refuse(absl::InvalidArgumentError(
          absl::StrCat(what, ", offset ", chunk.offset(), ": ", raw.status().message())));
    }
    if (absl::Status s = MakeDirectory(dir); !s.ok()) return refuse(s);
    if (absl::Status s = WriteAll(part, *raw, held); !s.ok()) return refuse(s);
    ++counters_.chunks;
    const uint64_t next = chunk.offset() + chunk.raw_bytes();
    Upload& u = uploads_[part];
    u.job = chunk.job();
    if (!chunk.node().empty()) u.node = chunk.node().substr(0, 256);
    u.declared = chunk.file_bytes();
    u.held = next;
    ack.set_next_offset(next);
    if (next < chunk.file_bytes()) return ack;
    if (::rename(part.c_str(), path.c_str()) != 0) {
      return refuse(
          absl::UnavailableError(absl::StrCat("cannot rename ", part, ": ", std::strerror(errno))));
    }
    uploads_.erase(part);
    ack.set_complete(true);
    ++counters_.files;
    counters_.bytes += chunk.file_bytes();
    EnforceRetentionLocked(chunk.job(), path, 0);
    for (const StoredCapture& f : FilesLocked(chunk.job())) {
      if (f.file_name == chunk.file_name()) done = f;
    }
  }
  if (!done.path.empty() && on_complete_) on_complete_(done);
  return ack;
}

std::vector<std::string> CaptureStore::Jobs(const std::string& job) const {
  std::vector<std::string> jobs;
  if (!job.empty()) {
    jobs.push_back(job);
  } else if (DIR* d = ::opendir(options_.root.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (shm::ValidJobId(e->d_name)) jobs.emplace_back(e->d_name);
    }
    ::closedir(d);
  }
  return jobs;
}

int CaptureStore::RemoveAbandonedUploads(int64_t now_s) {
  std::lock_guard<std::mutex> lock(mu_);
  int removed = 0;
  for (const PartFile& f : PartFilesLocked()) {
    if (now_s - static_cast<int64_t>(f.st.st_mtim.tv_sec) < options_.abandoned_upload_s) continue;
    if (::unlink(f.path.c_str()) == 0) ++removed;
    uploads_.erase(f.path);
  }
  counters_.abandoned += static_cast<uint64_t>(removed);
  return removed;
}

std::vector<StoredCapture> CaptureStore::FilesLocked(const std::string& job) const {
  std::vector<StoredCapture> out;
  for (const std::string& j : Jobs(job)) {
    const std::string dir = absl::StrCat(options_.root, "/", j);
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    while (const dirent* e = ::readdir(d)) {
      const std::optional<CaptureFileName> name = ParseCaptureFileName(e->d_name);
      if (!name) continue;
      StoredCapture f;
      f.job = j;
      f.file_name = e->d_name;
      f.path = absl::StrCat(dir, "/", e->d_name);
      f.kind = name->kind;
      f.rank = name->rank;
      f.first_step = name->first_step;
      f.capture_id = name->capture_id;
      struct stat st {};
      if (::stat(f.path.c_str(), &st) != 0) continue;
      f.bytes = static_cast<uint64_t>(st.st_size);
      f.stored_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      out.push_back(std::move(f));
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end(), [](const StoredCapture& a, const StoredCapture& b) {
    return a.stored_ns != b.stored_ns ? a.stored_ns < b.stored_ns : a.path < b.path;
  });
  return out;
}

bool CaptureStore::EnforceRetentionLocked(const std::string& job, const std::string& keep,
                                          uint64_t extra_bytes) {
  struct JobFiles {
    std::deque<StoredCapture> files;  // oldest first
    uint64_t bytes = 0;               // complete
    size_t count = 0;                 // complete files, `keep` included
    uint64_t reserved = 0;            // in flight
  };
  std::map<std::string, JobFiles> jobs;
  uint64_t total = 0;
  size_t count = 0;
  for (StoredCapture& f : FilesLocked("")) {
    JobFiles& j = jobs[f.job];
    j.bytes += f.bytes;
    ++j.count;
    total += f.bytes;
    ++count;
    if (f.path != keep) j.files.push_back(std::move(f));
  }
  for (const auto& [path, u] : uploads_) {
    jobs[u.job].reserved += u.reserved();
    total += u.reserved();
  }
  const size_t extra_files = extra_bytes > 0 ? 1 : 0;
  total += extra_bytes;
  const auto evict = [&](JobFiles& j) {
    const StoredCapture f = j.files.front();
    j.files.pop_front();
    if (::unlink(f.path.c_str()) != 0) return;
    j.bytes -= f.bytes;
    --j.count;
    total -= f.bytes;
    --count;
    ++counters_.evicted;
  };
  // A job beyond its own bounds drops its own oldest files.
  if (!job.empty()) {
    JobFiles& j = jobs[job];
    const auto over = [&] {
      return j.bytes + j.reserved + extra_bytes > options_.max_job_bytes ||
             j.count + extra_files > static_cast<size_t>(options_.max_job_files);
    };
    while (over() && !j.files.empty()) evict(j);
    if (j.bytes + j.reserved + extra_bytes > options_.max_job_bytes) return false;
  }
  // The store beyond its bounds drops the oldest file of the job holding the most.
  while (total > options_.max_total_bytes ||
         count + extra_files > static_cast<size_t>(options_.max_files)) {
    JobFiles* biggest = nullptr;
    for (auto& [name, j] : jobs) {
      if (j.files.empty()) continue;
      if (biggest == nullptr || j.bytes + j.reserved > biggest->bytes + biggest->reserved) {
        biggest = &j;
      }
    }
    if (biggest == nullptr) return false;
    evict(*biggest);
  }
  return true;
}

std::vector<StoredCapture> CaptureStore::Files(const std::string& job) const {
  std::lock_guard<std::mutex> lock(mu_);
  return FilesLocked(job);
}

CaptureStore::Counters CaptureStore::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  Counters c = counters_;
  for (const auto& [path, u] : uploads_) c.partial_bytes += u.held;
  c.partial_uploads = uploads_.size();
  return c;
}

}  // namespace stagefrontier
