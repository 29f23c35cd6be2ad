#include "daemon/coordinator/job_journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/coordinator/crc32c.h"

namespace stagefrontier {
namespace {

uint32_t LoadLe32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void PutLe32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

absl::Status ErrnoStatus(const std::string& what, const std::string& path) {
  const int e = errno;
  return absl::Status(e == ENOENT ? absl::StatusCode::kNotFound : absl::StatusCode::kInternal,
                      absl::StrCat(what, " ", path, ": ", std::strerror(e)));
}

}  // namespace

JournalScan ScanJournal(absl::string_view data,
                        absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink) {
  JournalScan scan;
  v1::JournalRecord record;
  size_t off = 0;
  while (off < data.size()) {
    if (data.size() - off < 8) {
      scan.error = absl::StrCat("incomplete record header at offset ", off);
      break;
    }
    const uint32_t len = LoadLe32(data.data() + off);
    const uint32_t crc = LoadLe32(data.data() + off + 4);
    if (len > kMaxJournalRecordBytes) {
      scan.error = absl::StrCat("record at offset ", off, " claims ", len, " bytes");
      break;
    }
    if (data.size() - off - 8 < len) {
      scan.error = absl::StrCat("record at offset ", off, " is cut short (", len, " bytes wanted, ",
                                data.size() - off - 8, " there)");
      break;
    }
    const char* payload = data.data() + off + 8;
    if (Crc32c(payload, len) != crc) {
      scan.error = absl::StrCat("record at offset ", off, " fails its checksum");
      break;
    }
    if (!record.ParseFromArray(payload, static_cast<int>(len))) {
      scan.error = absl::StrCat("record at offset ", off, " is not a JournalRecord");
      break;
    }
    if (absl::Status s = sink(record); !s.ok()) {
      scan.error = absl::StrCat("record at offset ", off, ": ", s.message());
      break;
    }
    off += 8 + len;
    scan.valid_bytes = off;
    ++scan.records;
  }
  return scan;
}

absl::StatusOr<std::unique_ptr<JobJournal>> JobJournal::Open(
    const std::string& path, bool fsync,
    absl::FunctionRef<absl::Status(const v1::JournalRecord&)> replay, JournalOpenInfo* info) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("cannot open journal", path);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    absl::Status s = ErrnoStatus("cannot stat journal", path);
    ::close(fd);
    return s;
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < data.size()) {
    const ssize_t n = ::pread(fd, data.data() + got, data.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status s = ErrnoStatus("cannot read journal", path);
      ::close(fd);
      return s;
    }
    got += static_cast<size_t>(n);
  }
  absl::Status replay_status;
  const JournalScan scan = ScanJournal(data, [&](const v1::JournalRecord& r) {
    replay_status = replay(r);
    return replay_status;
  });
  if (!replay_status.ok()) {
    ::close(fd);
    return replay_status;
  }
  JournalOpenInfo local;
  JournalOpenInfo& out = info != nullptr ? *info : local;
  out.records = scan.records;
  out.truncated_bytes = data.size() - scan.valid_bytes;
  out.truncation_reason = scan.error;
  if (out.truncated_bytes > 0) {
    if (::ftruncate(fd, static_cast<off_t>(scan.valid_bytes)) != 0) {
      absl::Status s = ErrnoStatus("cannot truncate the damaged tail of journal", path);
      ::close(fd);
      return s;
    }
  }
  return std::unique_ptr<JobJournal>(new JobJournal(path, fd, scan.valid_bytes, fsync));
}

JobJournal::~JobJournal() {
  (void)Flush();
  ::close(fd_);
}

void JobJournal::Append(const v1::JournalRecord& record) {
  std::lock_guard<std::mutex> lock(mu_);
  scratch_.clear();
  record.SerializeToString(&scratch_);
  PutLe32(pending_, static_cast<uint32_t>(scratch_.size()));
  PutLe32(pending_, Crc32c(scratch_.data(), scratch_.size()));
  pending_.append(scratch_);
  appended_ += 8 + scratch_.size();
}

uint64_t JobJournal::appended_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return appended_;
}

absl::Status JobJournal::Flush() {
  std::lock_guard<std::mutex> io(io_mu_);
  std::string buf;
  {
    std::lock_guard<std::mutex> lock(mu_);
    buf.swap(pending_);
  }
  if (buf.empty()) return absl::OkStatus();
  size_t done = 0;
  while (done < buf.size()) {
    const ssize_t n =
        ::pwrite(fd_, buf.data() + done, buf.size() - done, static_cast<off_t>(size_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status s = ErrnoStatus("cannot write journal", path_);
      // Keep the file a whole number of records, and the records for the next try.
      if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
        // The next open truncates the torn tail.
      }
      std::lock_guard<std::mutex> lock(mu_);
      pending_.insert(0, buf);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  size_ += buf.size();
  if (fsync_ && ::fdatasync(fd_) != 0) return ErrnoStatus("cannot fsync journal", path_);
  durable_.store(size_, std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace stagefrontier
