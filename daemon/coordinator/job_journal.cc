#include "daemon/coordinator/job_journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/archive/record_block.h"
#include "daemon/coordinator/crc32c.h"
#include "daemon/coordinator/journal_file_io.h"

namespace stagefrontier {
namespace {

uint32_t LoadLe32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void PutLe32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

// Makes a rename or link in `dir` durable.
void SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

// A unique name for a file beside `path`: "<path><tag>-<unix seconds>[-n]".
std::string AsideName(const std::string& path, const char* tag) {
  const std::string base = absl::StrCat(path, tag, "-", ::time(nullptr));
  std::string name = base;
  struct stat st {};
  for (int n = 1; ::lstat(name.c_str(), &st) == 0; ++n) name = absl::StrCat(base, "-", n);
  return name;
}

// Writes `bytes` to a new hidden file beside `path`, synced; returns its name.
constexpr absl::string_view kNoIntactRecordUrl = "stagefrontier/journal/no-intact-record";

absl::Status NoIntactRecordError(const std::string& message) {
  absl::Status s = absl::FailedPreconditionError(message);
  s.SetPayload(kNoIntactRecordUrl, absl::Cord("1"));
  return s;
}

absl::StatusOr<std::string> WriteHiddenFile(const std::string& path, const char* tag,
                                            const std::string& bytes, bool fsync) {
  const std::string tmp = HiddenSiblingPath(path, tag);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoStatus(errno, "cannot create", tmp);
  absl::Status s = PwriteAll(fd, bytes, 0, "cannot write", tmp);
  if (s.ok() && fsync && ::fdatasync(fd) != 0) s = ErrnoStatus(errno, "cannot fsync", tmp);
  ::close(fd);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return tmp;
}

std::string FileHeader() {
  std::string h(kJournalMagic, sizeof(kJournalMagic));
  PutLe32(h, kJournalFormat);
  PutLe32(h, 0);
  return h;
}

// One intact frame found by the scan.
struct Frame {
  uint64_t offset = 0;
  absl::string_view payload;
  bool compacted = false;  // the first record or a record block: part of a compacted prefix
};

// Tries to read one frame at `off`. Returns the frame's total size, or 0 with *why set.
size_t TryFrame(absl::string_view data, size_t off, uint32_t format, v1::JournalRecord* record,
                std::string* why) {
  const size_t header = format == 2 ? kJournalRecordHeaderBytes : 8;
  const size_t left = data.size() - off;
  if (left < header) {
    *why = "an incomplete record header";
    return 0;
  }
  const char* p = data.data() + off;
  uint32_t len = 0;
  uint32_t crc = 0;
  if (format == 2) {
    if (LoadLe32(p) != kJournalRecordSync) {
      *why = "no record sync word";
      return 0;
    }
    crc = LoadLe32(p + 4);
    len = LoadLe32(p + 8);
  } else {
    len = LoadLe32(p);
    crc = LoadLe32(p + 4);
  }
  if (len == 0 || len > kMaxJournalRecordBytes) {
    *why = absl::StrCat("a record claiming ", len, " bytes");
    return 0;
  }
  if (left - header < len) {
    *why = absl::StrCat("a record cut short (", len, " bytes wanted, ", left - header, " there)");
    return 0;
  }
  // Format 2 checks the length too (it sits right before the payload).
  const uint32_t actual =
      format == 2 ? Crc32c(p + 8, 4 + static_cast<size_t>(len)) : Crc32c(p + header, len);
  if (actual != crc) {
    *why = "a record failing its checksum";
    return 0;
  }
  if (!record->ParseFromArray(p + header, static_cast<int>(len)) ||
      record->body_case() == v1::JournalRecord::BODY_NOT_SET) {
    *why = "a record that is not a JournalRecord";
    return 0;
  }
  return header + len;
}

// Hands `record` to `sink`, or each record of it when it is a record block. Sets *malformed
// when the record is a block that does not decode (nothing of it reached `sink`): damage behind
// an intact frame, skipped like a damaged frame. A block of a newer version is not damage.
absl::Status ReplayRecord(const v1::JournalRecord& record,
                          absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink,
                          bool* malformed) {
  *malformed = false;
  if (!record.has_block()) return sink(record);
  bool sink_failed = false;
  absl::Status s = DecodeRecordBlock(record.block(), [&](const v1::JournalRecord& r) {
    absl::Status each = sink(r);
    sink_failed = !each.ok();
    return each;
  });
  *malformed = !s.ok() && !sink_failed && absl::IsInvalidArgument(s);
  return s;
}

// Reads the frames of `scan.format` from `off` on (see Scan).
void ScanFrames(absl::string_view data, size_t off,
                absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink,
                std::vector<Frame>* frames, JournalScan& scan) {
  scan.valid_end = off;
  v1::JournalRecord record;
  std::string why;
  while (off < data.size()) {
    size_t n = TryFrame(data, off, scan.format, &record, &why);
    if (n == 0) {
      // Damage: resynchronize on the next intact frame (format 2: at a sync word).
      JournalRegion region{off, 0, why};
      size_t next = off + 1;
      std::string ignored;
      for (; next < data.size(); ++next) {
        if (scan.format == 2) {
          const void* hit = std::memchr(data.data() + next, 0x53, data.size() - next);  // 'S'
          if (hit == nullptr) {
            next = data.size();
            break;
          }
          next = static_cast<size_t>(static_cast<const char*>(hit) - data.data());
        }
        if ((n = TryFrame(data, next, scan.format, &record, &ignored)) != 0) break;
      }
      region.bytes = next - off;
      scan.skipped.push_back(std::move(region));
      if (n == 0) break;
      off = next;
    }
    bool malformed = false;
    if (absl::Status s = ReplayRecord(record, sink, &malformed); malformed) {
      // An intact frame whose block does not decode: reported with its offset, the rest goes on.
      scan.skipped.push_back(JournalRegion{off, n, std::string(s.message())});
      off += n;
      continue;
    } else if (!s.ok()) {
      scan.error = absl::StrCat("record at offset ", off, ": ", s.message());
      return;
    }
    if (frames != nullptr) {
      const size_t header = scan.format == 2 ? kJournalRecordHeaderBytes : 8;
      frames->push_back(
          Frame{off, data.substr(off + header, n - header), scan.records == 0 || record.has_block()});
    }
    off += n;
    scan.valid_end = off;
    ++scan.records;
  }
}

// The scan behind ScanJournal, also handing each intact frame to `frames`.
JournalScan Scan(absl::string_view data,
                 absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink,
                 std::vector<Frame>* frames) {
  JournalScan scan;
  if (data.size() >= sizeof(kJournalMagic) &&
      std::memcmp(data.data(), kJournalMagic, sizeof(kJournalMagic)) == 0) {
    if (data.size() < kJournalHeaderBytes) {
      scan.error = "the journal's file header is cut short";
      return scan;
    }
    const uint32_t format = LoadLe32(data.data() + 8);
    if (format != kJournalFormat) {
      scan.error = absl::StrCat(
          "journal format ", format, " is ", format > kJournalFormat ? "newer than" : "not one of",
          " the formats this coordinator reads (1..", kJournalFormat, "): upgrade the coordinator");
      return scan;
    }
    scan.format = 2;
    ScanFrames(data, kJournalHeaderBytes, sink, frames, scan);
    return scan;
  }
  scan.format = 1;
  ScanFrames(data, 0, sink, frames, scan);
  if (scan.records > 0 || !scan.error.empty() || data.size() <= kJournalHeaderBytes) return scan;
  // Nothing reads as format 1: a format-2 journal whose header is damaged (one bad byte in the
  // magic) keeps the records behind it, found by their sync words as after any damage.
  JournalScan resynced;
  resynced.format = 2;
  resynced.skipped.push_back(JournalRegion{0, kJournalHeaderBytes, "the file header is damaged"});
  ScanFrames(data, kJournalHeaderBytes, sink, frames, resynced);
  return resynced.records > 0 ? resynced : scan;
}

}  // namespace

bool IsNoIntactRecord(const absl::Status& status) {
  return status.GetPayload(kNoIntactRecordUrl).has_value();
}

absl::StatusOr<std::string> SetJournalAside(const std::string& path) {
  const std::string aside = AsideName(path, ".unreadable");
  if (::rename(path.c_str(), aside.c_str()) != 0) {
    return ErrnoStatus(errno, "cannot move the unreadable journal aside from", path);
  }
  SyncDir(DirOf(path));
  return aside;
}

bool JournalScan::TailOnly() const {
  for (const JournalRegion& r : skipped) {
    if (r.offset < valid_end) return false;
  }
  return true;
}

JournalScan ScanJournal(absl::string_view data,
                        absl::FunctionRef<absl::Status(const v1::JournalRecord&)> sink) {
  return Scan(data, sink, nullptr);
}

size_t ReadJournalFrame(absl::string_view data, size_t offset, v1::JournalRecord* record) {
  if (offset >= data.size()) return 0;
  std::string why;
  return TryFrame(data, offset, kJournalFormat, record, &why);
}

void AppendJournalFrame(absl::string_view payload, std::string* out) {
  PutLe32(*out, kJournalRecordSync);
  std::string len;
  PutLe32(len, static_cast<uint32_t>(payload.size()));
  // CRC over the length bytes then the payload, without copying the payload.
  std::string covered = len;
  covered.append(payload.data(), payload.size());
  PutLe32(*out, Crc32c(covered.data(), covered.size()));
  out->append(len);
  out->append(payload.data(), payload.size());
}

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

absl::StatusOr<std::unique_ptr<JobJournal>> JobJournal::Create(
    const std::string& path, bool fsync, std::span<const v1::JournalRecord> records) {
  std::string bytes = FileHeader();
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
  return std::unique_ptr<JobJournal>(new JobJournal(path, fd, bytes.size(), fsync, compacted_end));
}

absl::StatusOr<std::unique_ptr<JobJournal>> JobJournal::OpenOrCreate(
    const std::string& path, bool fsync,
    absl::FunctionRef<absl::Status(const v1::JournalRecord&)> replay, JournalOpenInfo* info) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) return Open(path, fsync, replay, info);
  if (errno != ENOENT) {
    return absl::UnavailableError(absl::StrCat("cannot examine ", path, ": ", strerror(errno)));
  }
  return Create(path, fsync, {});
}

absl::StatusOr<std::unique_ptr<JobJournal>> JobJournal::Open(
    const std::string& path, bool fsync,
    absl::FunctionRef<absl::Status(const v1::JournalRecord&)> replay, JournalOpenInfo* info) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ELOOP) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal ", path, " is a symbolic link: journals are never followed"));
  }
  if (fd < 0) return ErrnoStatus(errno, "cannot open journal", path);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    absl::Status s = ErrnoStatus(errno, "cannot stat journal", path);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat("journal ", path, " is not a regular file"));
  }
  std::string data;
  if (absl::Status read = PreadExactly(fd, 0, static_cast<size_t>(st.st_size), "cannot read journal", path, &data); !read.ok()) {
    ::close(fd);
    return read;
  }
  std::vector<Frame> frames;
  absl::Status replay_status;
  const JournalScan scan = Scan(
      data,
      [&](const v1::JournalRecord& r) {
        replay_status = replay(r);
        return replay_status;
      },
      &frames);
  // Anything we do not understand is left exactly as it is.
  if (!replay_status.ok()) {
    ::close(fd);
    return replay_status;
  }
  if (!scan.error.empty()) {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("journal ", path, ": ", scan.error, "; left untouched"));
  }
  if (scan.records == 0 && !data.empty() && !scan.skipped.empty()) {
    ::close(fd);
    return NoIntactRecordError(absl::StrCat("journal ", path,
                                            " is not a StageFrontier journal (no intact record in ",
                                            data.size(), " bytes)"));
  }
  JournalOpenInfo local;
  JournalOpenInfo& out = info != nullptr ? *info : local;
  out = JournalOpenInfo{};
  out.format = scan.format;
  out.records = scan.records;
  out.skipped = scan.skipped;
  for (const JournalRegion& r : scan.skipped) out.skipped_bytes += r.bytes;

  uint64_t size = data.size();
  // Where the compacted prefix ends: after the first record and the blocks that follow it. The
  // intact frames lie one after the other from the header, in the file as it stays (only a
  // damaged tail follows them) and in the rewritten one alike.
  uint64_t compacted_end = kJournalHeaderBytes;
  for (const Frame& f : frames) {
    if (!f.compacted) break;
    compacted_end += kJournalRecordHeaderBytes + f.payload.size();
  }
  if (scan.format == 1 || !scan.TailOnly()) {
    // Rewrite every intact record into a new file that takes the journal's name; a damaged
    // original is kept under another name first (an undamaged format-1 one holds nothing
    // the new file lacks).
    std::string bytes = FileHeader();
    for (const Frame& f : frames) AppendJournalFrame(f.payload, &bytes);
    absl::StatusOr<std::string> tmp = WriteHiddenFile(path, ".recovering", bytes, fsync);
    if (!tmp.ok()) {
      ::close(fd);
      return tmp.status();
    }
    if (!scan.skipped.empty()) {
      out.kept_original = AsideName(path, ".damaged");
      if (::link(path.c_str(), out.kept_original.c_str()) != 0) {
        absl::Status s =
            ErrnoStatus(errno, "cannot keep the damaged journal as", out.kept_original);
        ::unlink(tmp->c_str());
        ::close(fd);
        return s;
      }
    }
    if (::rename(tmp->c_str(), path.c_str()) != 0) {
      absl::Status s = ErrnoStatus(errno, "cannot replace journal", path);
      ::unlink(tmp->c_str());
      ::close(fd);
      return s;
    }
    if (fsync) SyncDir(DirOf(path));
    ::close(fd);
    fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return ErrnoStatus(errno, "cannot open journal", path);
    size = bytes.size();
  } else if (!scan.skipped.empty()) {
    // A damaged tail (most often a crash mid-append): saved beside the journal, then cut off
    // so that appending resumes after the last intact record.
    const std::string tail = data.substr(scan.valid_end);
    absl::StatusOr<std::string> tmp = WriteHiddenFile(path, ".tail", tail, fsync);
    if (!tmp.ok()) {
      ::close(fd);
      return tmp.status();
    }
    out.saved_tail = AsideName(path, ".tail");
    if (::rename(tmp->c_str(), out.saved_tail.c_str()) != 0) {
      absl::Status s = ErrnoStatus(errno, "cannot keep the damaged tail as", out.saved_tail);
      ::unlink(tmp->c_str());
      ::close(fd);
      return s;
    }
    if (fsync) SyncDir(DirOf(path));
    if (::ftruncate(fd, static_cast<off_t>(scan.valid_end)) != 0) {
      absl::Status s = ErrnoStatus(errno, "cannot cut the damaged tail of journal", path);
      ::close(fd);
      return s;
    }
    size = scan.valid_end;
  }
  return std::unique_ptr<JobJournal>(new JobJournal(path, fd, size, fsync, compacted_end));
}

absl::Status JobJournal::Salvage(const std::string& path, bool fsync,
                                 const v1::JournalRecord& declaration, JournalOpenInfo* info) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ErrnoStatus(errno, "cannot open journal", path);
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat("journal ", path, " is not a regular file"));
  }
  std::string data;
  if (absl::Status read = PreadExactly(fd, 0, static_cast<size_t>(st.st_size), "cannot read journal", path, &data); !read.ok()) {
    ::close(fd);
    return read;
  }
  ::close(fd);
  std::vector<Frame> frames;
  std::vector<bool> keep;
  const JournalScan scan = Scan(
      data,
      [&](const v1::JournalRecord& r) {
        keep.push_back(r.body_case() != v1::JournalRecord::kDeclared);
        return absl::OkStatus();
      },
      &frames);
  if (!scan.error.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal ", path, ": ", scan.error, "; left untouched"));
  }
  if (scan.records == 0 && !scan.skipped.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("journal ", path, " is not a StageFrontier journal (no intact record in ",
                     data.size(), " bytes); left untouched"));
  }
  std::string bytes = FileHeader();
  std::string payload;
  declaration.SerializeToString(&payload);
  AppendJournalFrame(payload, &bytes);
  uint64_t kept = 1;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (!keep[i]) continue;
    AppendJournalFrame(frames[i].payload, &bytes);
    ++kept;
  }
  absl::StatusOr<std::string> tmp = WriteHiddenFile(path, ".salvaging", bytes, fsync);
  if (!tmp.ok()) return tmp.status();
  JournalOpenInfo local;
  JournalOpenInfo& out = info != nullptr ? *info : local;
  out = JournalOpenInfo{};
  out.format = scan.format;
  out.records = kept;
  out.skipped = scan.skipped;
  for (const JournalRegion& r : scan.skipped) out.skipped_bytes += r.bytes;
  if (!data.empty()) {
    out.kept_original = AsideName(path, ".damaged");
    if (::link(path.c_str(), out.kept_original.c_str()) != 0) {
      absl::Status s = ErrnoStatus(errno, "cannot keep the damaged journal as", out.kept_original);
      ::unlink(tmp->c_str());
      return s;
    }
  }
  if (::rename(tmp->c_str(), path.c_str()) != 0) {
    absl::Status s = ErrnoStatus(errno, "cannot replace journal", path);
    ::unlink(tmp->c_str());
    return s;
  }
  if (fsync) SyncDir(DirOf(path));
  return absl::OkStatus();
}

JobJournal::~JobJournal() {
  (void)Flush();
  ::close(fd_);
}

void JobJournal::Append(const v1::JournalRecord& record) {
  std::lock_guard<std::mutex> lock(mu_);
  scratch_.clear();
  record.SerializeToString(&scratch_);
  const size_t before = pending_.size();
  AppendJournalFrame(scratch_, &pending_);
  appended_ += pending_.size() - before;
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

JobJournal::Layout JobJournal::CurrentLayout() const {
  std::lock_guard<std::mutex> io(io_mu_);
  return Layout{compacted_end_, size_};
}

absl::StatusOr<int> JobJournal::OpenForReading() const {
  std::lock_guard<std::mutex> io(io_mu_);
  const int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "cannot duplicate the descriptor of journal", path_);
  return fd;
}

absl::Status JobJournal::ReplacePrefix(const Layout& was, const std::string& new_prefix_path,
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
  // What was written since the compaction looked: the records after its region.
  std::string tail;
  if (absl::Status s = PreadExactly(fd_, was.written_end, size_ - was.written_end,
                                    "cannot read journal", path_, &tail);
      !s.ok()) {
    return fail(s, out);
  }
  const uint64_t new_size = prefix + tail.size();
  if (prefix >= was.written_end || new_compacted_end > prefix) {
    return fail(absl::FailedPreconditionError(absl::StrCat(
                    "the compacted copy of journal ", path_, " (", prefix,
                    " bytes) would not replace ", was.written_end, " bytes with fewer")),
                out);
  }
  if (absl::Status s = PwriteAll(out, tail, prefix, "cannot write", new_prefix_path); !s.ok()) {
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
