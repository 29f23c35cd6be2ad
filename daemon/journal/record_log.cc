#include "daemon/journal/record_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/journal/journal_file_io.h"

namespace stagefrontier {
namespace {

// A log file open for reading and writing, read whole.
struct LoadedFile {
  int fd = -1;
  std::string data;
};

// Opens the regular file `path` (never through a symbolic link) and reads all of it.
absl::StatusOr<LoadedFile> LoadForOpen(const std::string& path) {
  LoadedFile file;
  file.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (file.fd < 0 && errno == ELOOP) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal ", path, " is a symbolic link: journals are never followed"));
  }
  if (file.fd < 0) return ErrnoStatus(errno, "cannot open journal", path);
  struct stat st {};
  absl::Status s;
  if (::fstat(file.fd, &st) != 0) {
    s = ErrnoStatus(errno, "cannot stat journal", path);
  } else if (!S_ISREG(st.st_mode)) {
    s = absl::FailedPreconditionError(absl::StrCat("journal ", path, " is not a regular file"));
  } else {
    s = PreadExactly(file.fd, 0, static_cast<size_t>(st.st_size), "cannot read journal", path,
                     &file.data);
  }
  if (!s.ok()) {
    ::close(file.fd);
    return s;
  }
  return file;
}

// The bytes of the regular file `path`, read without writing (for Salvage).
absl::StatusOr<std::string> LoadForSalvage(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ErrnoStatus(errno, "cannot open journal", path);
  struct stat st {};
  absl::Status s;
  std::string data;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    s = absl::FailedPreconditionError(absl::StrCat("journal ", path, " is not a regular file"));
  } else {
    s = PreadExactly(fd, 0, static_cast<size_t>(st.st_size), "cannot read journal", path, &data);
  }
  ::close(fd);
  if (!s.ok()) return s;
  return data;
}

// Anything Open does not understand is left exactly as it is: fails for a replay error, an
// unknown format or a file with no intact record.
absl::Status CheckOpenScan(const std::string& path, size_t bytes, const JournalScan& scan,
                           const absl::Status& replay_status) {
  if (!replay_status.ok()) return replay_status;
  if (!scan.error.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal ", path, ": ", scan.error, "; left untouched"));
  }
  if (scan.records == 0 && bytes > 0 && !scan.skipped.empty()) {
    return NoIntactRecordError(absl::StrCat("journal ", path,
                                            " is not a StageFrontier journal (no intact record in ",
                                            bytes, " bytes)"));
  }
  return absl::OkStatus();
}

JournalOpenInfo InfoOf(const JournalScan& scan) {
  JournalOpenInfo info;
  info.format = scan.format;
  info.records = scan.records;
  info.skipped = scan.skipped;
  for (const JournalRegion& r : scan.skipped) info.skipped_bytes += r.bytes;
  return info;
}

// Where the compacted prefix ends: after the first record and the blocks that follow it. The
// intact frames lie one after the other from the header, in the file as it stays (only a
// damaged tail follows them) and in a rewritten one alike.
uint64_t CompactedEnd(const std::vector<JournalFrame>& frames) {
  uint64_t end = kJournalHeaderBytes;
  for (const JournalFrame& f : frames) {
    if (!f.compacted) break;
    end += kJournalRecordHeaderBytes + f.payload.size();
  }
  return end;
}

// Renames the complete file `tmp` over `path`, first keeping the original under another name
// (*kept) when `keep_original`. On failure `tmp` is removed and `path` is as it was.
absl::Status InstallOver(const std::string& tmp, const std::string& path, bool fsync,
                         bool keep_original, std::string* kept) {
  if (keep_original) {
    *kept = AsideName(path, ".damaged");
    if (::link(path.c_str(), kept->c_str()) != 0) {
      absl::Status s = ErrnoStatus(errno, "cannot keep the damaged journal as", *kept);
      ::unlink(tmp.c_str());
      return s;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status s = ErrnoStatus(errno, "cannot replace journal", path);
    ::unlink(tmp.c_str());
    return s;
  }
  if (fsync) SyncDir(DirOf(path));
  return absl::OkStatus();
}

// Writes every intact frame into a new format-2 file that takes the log's name (a damaged
// original is kept under another name first: an undamaged format-1 one holds nothing the new
// file lacks). Returns the new file's size.
absl::StatusOr<uint64_t> RewriteIntact(const std::string& path, bool fsync,
                                       const std::vector<JournalFrame>& frames, bool damaged,
                                       std::string* kept) {
  std::string bytes = JournalFileHeader();
  for (const JournalFrame& f : frames) AppendJournalFrame(f.payload, &bytes);
  absl::StatusOr<std::string> tmp = WriteHiddenFile(path, ".recovering", bytes, fsync);
  if (!tmp.ok()) return tmp.status();
  if (absl::Status s = InstallOver(*tmp, path, fsync, damaged, kept); !s.ok()) return s;
  return bytes.size();
}

// A damaged tail (most often a crash mid-append) from `valid_end` on: saved beside the log
// (*saved), then cut off so that appending resumes after the last intact record.
absl::Status CutDamagedTail(const std::string& path, bool fsync, int fd, absl::string_view data,
                            uint64_t valid_end, std::string* saved) {
  absl::StatusOr<std::string> tmp = WriteHiddenFile(path, ".tail", data.substr(valid_end), fsync);
  if (!tmp.ok()) return tmp.status();
  *saved = AsideName(path, ".tail");
  if (::rename(tmp->c_str(), saved->c_str()) != 0) {
    absl::Status s = ErrnoStatus(errno, "cannot keep the damaged tail as", *saved);
    ::unlink(tmp->c_str());
    return s;
  }
  if (fsync) SyncDir(DirOf(path));
  if (::ftruncate(fd, static_cast<off_t>(valid_end)) != 0) {
    return ErrnoStatus(errno, "cannot cut the damaged tail of journal", path);
  }
  return absl::OkStatus();
}

}  // namespace

std::string JournalOpenInfo::Describe() const {
  std::string out = absl::StrCat(records, " records");
  if (format == 1) absl::StrAppend(&out, "; converted from journal format 1");
  if (!skipped.empty()) {
    std::vector<std::string> parts;
    for (const JournalRegion& r : skipped) {
      parts.push_back(absl::StrCat(r.bytes, " bytes at offset ", r.offset, " (", r.reason, ")"));
    }
    absl::StrAppend(&out, "; skipped damaged bytes: ", absl::StrJoin(parts, ", "));
  }
  if (!saved_tail.empty()) absl::StrAppend(&out, "; the damaged tail was saved to ", saved_tail);
  if (!kept_original.empty()) absl::StrAppend(&out, "; the original is kept at ", kept_original);
  return out;
}

absl::StatusOr<std::unique_ptr<RecordLog>> RecordLog::Create(
    const std::string& path, bool fsync, std::span<const v1::JournalRecord> records) {
  std::string bytes = JournalFileHeader();
  std::string payload;
  uint64_t compacted_end = bytes.size();  // as Open finds it: the first record, then blocks
  bool in_prefix = true;
  for (size_t i = 0; i < records.size(); ++i) {
    payload.clear();
    records[i].SerializeToString(&payload);
    AppendJournalFrame(payload, &bytes);
    in_prefix = in_prefix && (i == 0 || records[i].has_block());
    if (in_prefix) compacted_end = bytes.size();
  }
  absl::StatusOr<std::string> tmp = WriteHiddenFile(path, ".creating", bytes, fsync);
  if (!tmp.ok()) {
    return absl::Status(tmp.status().code(), absl::StrCat("cannot create the journal ", path, ": ",
                                                          tmp.status().message()));
  }
  // link(2) publishes the whole file at once and refuses to replace an existing one.
  const int rc = ::link(tmp->c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp->c_str());
  if (rc != 0) {
    if (err == EEXIST) return absl::AlreadyExistsError(absl::StrCat("journal ", path, " exists"));
    return ErrnoStatus(err, "cannot create the journal", path);
  }
  if (fsync) SyncDir(DirOf(path));
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ErrnoStatus(errno, "cannot open journal", path);
  return std::unique_ptr<RecordLog>(new RecordLog(path, fd, bytes.size(), fsync, compacted_end));
}

absl::StatusOr<std::unique_ptr<RecordLog>> RecordLog::OpenOrCreate(const std::string& path,
                                                                   bool fsync, Replay replay,
                                                                   JournalOpenInfo* info) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) return Open(path, fsync, replay, info);
  if (errno != ENOENT) {
    return absl::UnavailableError(absl::StrCat("cannot examine ", path, ": ", strerror(errno)));
  }
  return Create(path, fsync, {});
}

absl::StatusOr<std::unique_ptr<RecordLog>> RecordLog::Open(const std::string& path, bool fsync,
                                                           Replay replay, JournalOpenInfo* info) {
  absl::StatusOr<LoadedFile> file = LoadForOpen(path);
  if (!file.ok()) return file.status();
  int fd = file->fd;
  std::vector<JournalFrame> frames;
  absl::Status replay_status;
  const JournalScan scan = ScanJournalFrames(
      file->data,
      [&](const v1::JournalRecord& r) {
        replay_status = replay(r);
        return replay_status;
      },
      &frames);
  if (absl::Status s = CheckOpenScan(path, file->data.size(), scan, replay_status); !s.ok()) {
    ::close(fd);
    return s;
  }
  JournalOpenInfo local;
  JournalOpenInfo& out = info != nullptr ? *info : local;
  out = InfoOf(scan);
  const uint64_t compacted_end = CompactedEnd(frames);
  uint64_t size = file->data.size();
  if (scan.format == 1 || !scan.TailOnly()) {
    absl::StatusOr<uint64_t> rewritten =
        RewriteIntact(path, fsync, frames, !scan.skipped.empty(), &out.kept_original);
    ::close(fd);
    if (!rewritten.ok()) return rewritten.status();
    fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return ErrnoStatus(errno, "cannot open journal", path);
    size = *rewritten;
  } else if (!scan.skipped.empty()) {
    if (absl::Status s =
            CutDamagedTail(path, fsync, fd, file->data, scan.valid_end, &out.saved_tail);
        !s.ok()) {
      ::close(fd);
      return s;
    }
    size = scan.valid_end;
  }
  return std::unique_ptr<RecordLog>(new RecordLog(path, fd, size, fsync, compacted_end));
}

absl::Status RecordLog::Salvage(const std::string& path, bool fsync, const v1::JournalRecord& first,
                                absl::FunctionRef<bool(const v1::JournalRecord&)> keep,
                                JournalOpenInfo* info) {
  absl::StatusOr<std::string> data = LoadForSalvage(path);
  if (!data.ok()) return data.status();
  std::vector<JournalFrame> frames;
  const JournalScan scan = ScanJournalFrames(
      *data, [](const v1::JournalRecord&) { return absl::OkStatus(); }, &frames);
  if (!scan.error.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal ", path, ": ", scan.error, "; left untouched"));
  }
  if (scan.records == 0 && !scan.skipped.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal ", path, " is not a StageFrontier journal (no intact record in ",
                     data->size(), " bytes); left untouched"));
  }
  std::string bytes = JournalFileHeader();
  AppendJournalFrame(first.SerializeAsString(), &bytes);
  uint64_t kept = 1;
  v1::JournalRecord record;
  for (const JournalFrame& f : frames) {
    // Each frame parsed when the scan found it.
    if (!record.ParseFromArray(f.payload.data(), static_cast<int>(f.payload.size())) ||
        !keep(record)) {
      continue;
    }
    AppendJournalFrame(f.payload, &bytes);
    ++kept;
  }
  absl::StatusOr<std::string> tmp = WriteHiddenFile(path, ".salvaging", bytes, fsync);
  if (!tmp.ok()) return tmp.status();
  JournalOpenInfo local;
  JournalOpenInfo& out = info != nullptr ? *info : local;
  out = InfoOf(scan);
  out.records = kept;
  return InstallOver(*tmp, path, fsync, !data->empty(), &out.kept_original);
}

RecordLog::~RecordLog() {
  (void)Flush();
  ::close(fd_);
}

void RecordLog::Append(const v1::JournalRecord& record) {
  AppendFrame([&](std::string* pending) {
    scratch_.clear();
    record.SerializeToString(&scratch_);
    AppendJournalFrame(scratch_, pending);
  });
}

void RecordLog::AppendRankSteps(const v1::RankSteps& steps) {
  AppendFrame([&](std::string* pending) { AppendRankStepsFrame(steps, pending); });
}

void RecordLog::AppendFrame(absl::FunctionRef<void(std::string* pending)> append) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t before = pending_.size();
  append(&pending_);
  appended_ += pending_.size() - before;  // positions count every byte appended
}

uint64_t RecordLog::appended_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return appended_;
}

absl::Status RecordLog::Flush() {
  std::lock_guard<std::mutex> io(io_mu_);
  std::string buf;
  {
    std::lock_guard<std::mutex> lock(mu_);
    buf.swap(pending_);
  }
  if (buf.empty()) {
    // Nothing new; but a sync that failed before must be retried, or acks wait forever.
    if (durable_.load(std::memory_order_acquire) == base_ + size_) return absl::OkStatus();
    if (fsync_ && ::fdatasync(fd_) != 0) return ErrnoStatus(errno, "cannot fsync journal", path_);
    durable_.store(base_ + size_, std::memory_order_release);
    return absl::OkStatus();
  }
  if (absl::Status s = PwriteAll(fd_, buf, size_, "cannot write journal", path_); !s.ok()) {
    // Keep the file a whole number of records, and the records for the next try.
    if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
      // The next open saves and cuts the torn tail.
    }
    std::lock_guard<std::mutex> lock(mu_);
    pending_.insert(0, buf);
    return s;
  }
  size_ += buf.size();
  if (fsync_ && ::fdatasync(fd_) != 0) return ErrnoStatus(errno, "cannot fsync journal", path_);
  durable_.store(base_ + size_, std::memory_order_release);
  return absl::OkStatus();
}

RecordLog::Layout RecordLog::CurrentLayout() const {
  std::lock_guard<std::mutex> io(io_mu_);
  return Layout{compacted_end_, size_};
}

absl::StatusOr<int> RecordLog::OpenForReading() const {
  std::lock_guard<std::mutex> io(io_mu_);
  const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "cannot duplicate the descriptor of journal", path_);
  return fd;
}

absl::Status RecordLog::ReplacePrefix(const Layout& was, const std::string& new_prefix_path,
                                      uint64_t new_compacted_end) {
  std::lock_guard<std::mutex> io(io_mu_);
  auto fail = [&](absl::Status s, int fd) {
    if (fd >= 0) ::close(fd);
    ::unlink(new_prefix_path.c_str());
    return s;
  };
  if (was.compacted_end != compacted_end_ || was.written_end > size_) {
    return fail(absl::FailedPreconditionError(absl::StrCat(
                    "journal ", path_, " changed while it was being compacted; not replaced")),
                -1);
  }
  // Opened before the rename, so that this descriptor is the journal's once it has its name.
  const int out = ::open(new_prefix_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (out < 0) return fail(ErrnoStatus(errno, "cannot open", new_prefix_path), -1);
  struct stat st {};
  if (::fstat(out, &st) != 0) return fail(ErrnoStatus(errno, "cannot stat", new_prefix_path), out);
  const uint64_t prefix = static_cast<uint64_t>(st.st_size);
  // What was written since the compaction looked: the records after its region, copied in the
  // kernel (however much a long compaction let accumulate, no buffer holds it).
  const uint64_t tail = size_ - was.written_end;
  const uint64_t new_size = prefix + tail;
  if (prefix >= was.written_end || new_compacted_end > prefix) {
    return fail(absl::FailedPreconditionError(absl::StrCat(
                    "the compacted copy of journal ", path_, " (", prefix,
                    " bytes) would not replace ", was.written_end, " bytes with fewer")),
                out);
  }
  if (absl::Status s = CopyRange(fd_, was.written_end, out, prefix, tail,
                                 "cannot copy the newest records of journal", path_);
      !s.ok()) {
    return fail(s, out);
  }
  if (fsync_ && ::fdatasync(out) != 0) {
    return fail(ErrnoStatus(errno, "cannot fsync", new_prefix_path), out);
  }
  if (::rename(new_prefix_path.c_str(), path_.c_str()) != 0) {
    return fail(ErrnoStatus(errno, "cannot replace journal", path_), out);
  }
  if (fsync_) SyncDir(DirOf(path_));
  ::close(fd_);
  fd_ = out;
  base_ += size_ - new_size;  // positions go on from where they were
  size_ = new_size;
  compacted_end_ = new_compacted_end;
  // Everything in the new file was synced with it (or, without fsync, written).
  durable_.store(base_ + size_, std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace stagefrontier
