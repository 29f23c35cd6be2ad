#include "daemon/captures/capture_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/captures/capture_compression.h"
#include "daemon/captures/capture_file_name.h"
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
  size_t done = 0;
  int error = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (error != 0) {
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

absl::Status CaptureStore::Open() { return MakeDirectory(options_.root); }

absl::StatusOr<v1::CaptureChunkAck> CaptureStore::Accept(const v1::CaptureChunk& chunk) {
  StoredCapture done;
  v1::CaptureChunkAck ack;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto refuse = [&](absl::Status s) {
      ++counters_.refused;
      return s;
    };
    if (!shm::ValidJobId(chunk.job())) {
      return refuse(absl::InvalidArgumentError(
          absl::StrCat("capture chunk: job \"", chunk.job().substr(0, 80),
                       "\" is not a job id (1-63 of [A-Za-z0-9_.-], not starting with '.')")));
    }
    const std::optional<CaptureFileName> name = ParseCaptureFileName(chunk.file_name());
    if (!name) {
      return refuse(absl::InvalidArgumentError(
          absl::StrCat("capture chunk: file name \"", chunk.file_name().substr(0, 80),
                       "\" is not trace_rank<R>_step<F>.json")));
    }
    const std::string what = absl::StrCat("capture ", chunk.file_name(), " of job ", chunk.job());
    if (chunk.file_bytes() > options_.max_file_bytes) {
      return refuse(absl::ResourceExhaustedError(
          absl::StrCat(what, " is ", chunk.file_bytes(), " bytes, over the coordinator's limit of ",
                       options_.max_file_bytes, " (--capture-max-mb)")));
    }
    if (chunk.raw_bytes() > options_.max_chunk_bytes ||
        (chunk.raw_bytes() == 0 && chunk.file_bytes() != 0) ||
        chunk.offset() > chunk.file_bytes() ||
        chunk.raw_bytes() > chunk.file_bytes() - chunk.offset()) {
      return refuse(absl::InvalidArgumentError(
          absl::StrCat(what, ": a chunk of ", chunk.raw_bytes(), " bytes at offset ",
                       chunk.offset(), " does not fit a file of ", chunk.file_bytes(),
                       " bytes (chunks hold 1..", options_.max_chunk_bytes, " bytes)")));
    }
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
    absl::StatusOr<std::string> raw = InflateChunk(chunk.data(), chunk.raw_bytes());
    if (!raw.ok()) {
      return refuse(absl::InvalidArgumentError(
          absl::StrCat(what, ", offset ", chunk.offset(), ": ", raw.status().message())));
    }
    if (absl::Status s = MakeDirectory(dir); !s.ok()) return refuse(s);
    if (absl::Status s = WriteAll(part, *raw, held); !s.ok()) return refuse(s);
    ++counters_.chunks;
    const uint64_t next = chunk.offset() + chunk.raw_bytes();
    ack.set_next_offset(next);
    if (next < chunk.file_bytes()) return ack;
    if (::rename(part.c_str(), path.c_str()) != 0) {
      return refuse(
          absl::UnavailableError(absl::StrCat("cannot rename ", part, ": ", std::strerror(errno))));
    }
    ack.set_complete(true);
    ++counters_.files;
    counters_.bytes += chunk.file_bytes();
    EnforceRetentionLocked(path);
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
  for (const std::string& j : Jobs("")) {
    const std::string dir = absl::StrCat(options_.root, "/", j);
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    std::vector<std::string> stale;
    while (const dirent* e = ::readdir(d)) {
      std::string_view name = e->d_name;
      if (!name.ends_with(".part")) continue;
      name.remove_suffix(5);
      if (!ParseCaptureFileName(name)) continue;
      const std::string path = absl::StrCat(dir, "/", e->d_name);
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0) continue;
      if (now_s - static_cast<int64_t>(st.st_mtim.tv_sec) >= options_.abandoned_upload_s) {
        stale.push_back(path);
      }
    }
    ::closedir(d);
    for (const std::string& path : stale) {
      if (::unlink(path.c_str()) == 0) ++removed;
    }
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
      f.rank = name->rank;
      f.first_step = name->first_step;
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

void CaptureStore::EnforceRetentionLocked(const std::string& keep) {
  std::vector<StoredCapture> files = FilesLocked("");
  uint64_t total = 0;
  for (const StoredCapture& f : files) total += f.bytes;
  size_t count = files.size();
  // Oldest first; the file just completed stays whatever the clock's resolution says.
  for (const StoredCapture& f : files) {
    if (count <= 1) break;
    if (f.path == keep) continue;
    if (count <= static_cast<size_t>(options_.max_files) && total <= options_.max_total_bytes) {
      break;
    }
    if (::unlink(f.path.c_str()) == 0) {
      --count;
      total -= f.bytes;
      ++counters_.evicted;
    }
  }
}

std::vector<StoredCapture> CaptureStore::Files(const std::string& job) const {
  std::lock_guard<std::mutex> lock(mu_);
  return FilesLocked(job);
}

CaptureStore::Counters CaptureStore::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

}  // namespace stagefrontier
