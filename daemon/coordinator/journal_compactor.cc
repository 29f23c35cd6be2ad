#include "daemon/coordinator/journal_compactor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/archive/record_block_builder.h"
#include "daemon/journal/journal_file_io.h"
#include "daemon/journal/journal_frame.h"

namespace stagefrontier {
namespace {

// Closes a descriptor and removes the file it was made for (if named), unless released.
class TempFile {
 public:
  TempFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!released_ && !path_.empty()) ::unlink(path_.c_str());
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  void Release() { released_ = true; }

 private:
  std::string path_;
  int fd_;
  bool released_ = false;
};

// A region's frames, read through one reused buffer of about `chunk` bytes (a region is
// hundreds of MiB: read whole, each compaction took that much fresh memory and zero-filled it).
class RegionFrames {
 public:
  RegionFrames(int fd, const std::string& path, uint64_t begin, uint64_t end, size_t chunk)
      : fd_(fd), path_(path), next_(begin), end_(end), chunk_(std::max<size_t>(chunk, 1)) {}

  // The next whole frame into `record`: returns its size, or 0 at the region's end, at a frame
  // the region's end cuts (it waits for the next compaction) or at bytes that are no intact
  // frame (as ReadJournalFrame).
  absl::StatusOr<size_t> Next(v1::JournalRecord* record) {
    for (;;) {
      const size_t held = buf_.size() - pos_;
      if (held > 0) {
        if (const size_t n = ReadJournalFrame(buf_, pos_, record); n > 0) {
          pos_ += n;
          return n;
        }
      }
      // No whole frame at pos_: the rest of it may lie past the buffer.
      const size_t need = JournalFrameSpan(buf_, pos_);
      if (need == 0 || held >= need || next_ >= end_) return 0;
      if (absl::Status s = Fill(need); !s.ok()) return s;
    }
  }

 private:
  // Keeps the bytes from pos_ and reads more after them: at least `need` held if the region
  // has them, and up to chunk_.
  absl::Status Fill(size_t need) {
    buf_.erase(0, pos_);
    pos_ = 0;
    const size_t held = buf_.size();
    const uint64_t want = std::max(need, chunk_) - held;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(want, end_ - next_));
    buf_.resize(held + n);
    if (absl::Status s = PreadInto(fd_, next_, buf_.data() + held, n, "cannot read journal", path_);
        !s.ok()) {
      return s;
    }
    next_ += n;
    return absl::OkStatus();
  }

  const int fd_;
  const std::string& path_;
  uint64_t next_;  // the file offset of the next byte to read
  const uint64_t end_;
  const size_t chunk_;
  std::string buf_;
  size_t pos_ = 0;
};

// When the plain records are due: min_plain_bytes, and prefix_fraction of the compacted prefix
// (each compaction copies the prefix).
uint64_t DueBytes(const JournalCompactorOptions& options, const RecordLog::Layout& was) {
  // A fraction that is not a number in [0, 1000] is taken as 0 or 1000 (no cast out of range).
  const double fraction = std::isfinite(options.prefix_fraction)
                              ? std::clamp(options.prefix_fraction, 0.0, 1000.0)
                              : 0.0;
  const double by_prefix = fraction * static_cast<double>(was.compacted_end);
  return std::max<uint64_t>(options.min_plain_bytes, by_prefix >= 0x1p62
                                                         ? uint64_t{1} << 62
                                                         : static_cast<uint64_t>(by_prefix));
}

// What a region became: its records and plain bytes taken, the blocks built, and where they end
// in the new file.
struct RegionCompacted {
  uint64_t records = 0;
  uint64_t plain_bytes = 0;
  uint64_t blocks = 0;
  uint64_t end = 0;
};

// Reads `region`'s records (plain ones only: a block or a declaration there is damage) and
// writes them as record blocks into `out` from `offset`, a chunk at a time through one buffer.
absl::StatusOr<RegionCompacted> CompactRegion(RegionFrames& region, const RecordLog::Layout& was,
                                              const TempFile& out, uint64_t offset,
                                              const std::string& path, uint32_t stage_count,
                                              const JournalCompactorOptions& options) {
  RegionCompacted done{.records = 0, .plain_bytes = 0, .blocks = 0, .end = offset};
  RecordBlockBuilder builder({.stage_count = stage_count, .zstd_level = options.zstd_level},
                             options.block_steps, options.verify_every);
  std::string frames, payload;
  absl::Status written_ok;
  auto write_frames = [&] {
    if (!written_ok.ok() || frames.empty()) return;
    written_ok = PwriteAll(out.fd(), frames, done.end, "cannot write", out.path());
    done.end += frames.size();
    frames.clear();
  };
  auto emit = [&](v1::JournalRecord block) {
    payload.clear();
    block.SerializeToString(&payload);
    AppendJournalFrame(payload, &frames);
    if (frames.size() >= options.io_chunk_bytes) write_frames();
  };
  v1::JournalRecord record;
  for (;;) {
    absl::StatusOr<size_t> n = region.Next(&record);
    if (!n.ok()) return n.status();
    if (*n == 0) break;  // the region's end (or a frame it cut: that waits for the next time)
    if (record.has_block() || record.has_declared()) {
      return absl::DataLossError(absl::StrCat("journal ", path, ": a ",
                                              record.has_block() ? "record block" : "declaration",
                                              " at offset ", was.compacted_end + done.plain_bytes,
                                              " among the plain records; not compacted"));
    }
    if (absl::Status s = builder.Add(std::move(record), emit); !s.ok()) return s;
    if (!written_ok.ok()) return written_ok;
    ++done.records;
    done.plain_bytes += *n;
  }
  if (done.plain_bytes == 0) return done;
  if (absl::Status s = builder.Finish(emit); !s.ok()) return s;
  write_frames();
  if (!written_ok.ok()) return written_ok;
  done.blocks = builder.blocks();
  return done;
}

// The records appended since the region was read, copied after the blocks (the new file ends at
// `out_end`) and, when the journal syncs, synced with the rest: outside the journal's write
// lock, twice (the second round takes what came during the first sync), so that the swap under
// the lock has only the last moment's to copy and sync however long the compaction took.
// Returns the file offset of the old journal copied up to.
absl::StatusOr<uint64_t> CatchUp(RecordLog& journal, const TempFile& in, const TempFile& out,
                                 uint64_t copied_to, uint64_t out_end) {
  for (int round = 0; round < 2; ++round) {
    const uint64_t written_end = journal.CurrentLayout().written_end;
    if (written_end > copied_to) {
      if (absl::Status s = CopyRange(in.fd(), copied_to, out.fd(), out_end, written_end - copied_to,
                                     "cannot copy the newest records of", journal.path());
          !s.ok()) {
        return s;
      }
      out_end += written_end - copied_to;
      copied_to = written_end;
    }
    if (journal.syncs() && ::fdatasync(out.fd()) != 0) {
      return ErrnoStatus(errno, "cannot fsync", out.path());
    }
  }
  return copied_to;
}

}  // namespace

std::string JournalCompaction::Describe() const {
  return absl::StrCat(records, " records into ", blocks, " record blocks, the file ",
                      file_bytes_before, " -> ", file_bytes_after, " bytes in ",
                      absl::SixDigits(seconds), " s");
}

absl::StatusOr<JournalCompaction> CompactLiveJournal(JobJournal& job_journal, uint32_t stage_count,
                                                     const JournalCompactorOptions& options) {
  RecordLog& journal = job_journal.log();
  const auto start = std::chrono::steady_clock::now();
  JournalCompaction result;
  const RecordLog::Layout was = journal.CurrentLayout();
  const uint64_t due = DueBytes(options, was);
  if (was.written_end < was.compacted_end + due) return result;
  absl::StatusOr<int> in_fd = journal.OpenForReading();
  if (!in_fd.ok()) return in_fd.status();
  TempFile in("", *in_fd);  // a descriptor only: nothing to remove
  const std::string& path = journal.path();

  // The region: whole frames from the end of the compacted prefix, all that was due.
  const uint64_t region_bytes = std::min<uint64_t>(was.written_end - was.compacted_end,
                                                   std::max(options.max_region_bytes, 2 * due));
  RegionFrames region(in.fd(), path, was.compacted_end, was.compacted_end + region_bytes,
                      options.io_chunk_bytes);
  const std::string temp_path = HiddenSiblingPath(path, ".compacting");
  const int out_fd =
      ::open(temp_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (out_fd < 0) return ErrnoStatus(errno, "cannot create", temp_path);
  TempFile out(temp_path, out_fd);
  if (absl::Status s = CopyRange(in.fd(), 0, out.fd(), 0, was.compacted_end,
                                 "cannot copy the compacted prefix of", path);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<RegionCompacted> done =
      CompactRegion(region, was, out, was.compacted_end, path, stage_count, options);
  if (!done.ok()) return done.status();
  if (done->plain_bytes == 0) {
    return absl::DataLossError(absl::StrCat("journal ", path, ": no intact record within ",
                                            region_bytes, " bytes at offset ", was.compacted_end,
                                            "; not compacted"));
  }
  const RecordLog::Layout region_end{was.compacted_end, was.compacted_end + done->plain_bytes};
  // Would not shrink (a tiny region): leave it for a larger one.
  if (done->end >= region_end.written_end) return result;
  absl::StatusOr<uint64_t> copied_to = CatchUp(journal, in, out, region_end.written_end, done->end);
  if (!copied_to.ok()) return copied_to.status();
  // ReplacePrefix appends what follows; it takes the file (or removes it).
  out.Release();
  if (absl::Status s = journal.ReplacePrefix({was.compacted_end, *copied_to}, temp_path, done->end);
      !s.ok()) {
    return s;
  }
  result.records = done->records;
  result.blocks = done->blocks;
  const RecordLog::Layout now = journal.CurrentLayout();
  result.file_bytes_after = now.written_end;
  result.file_bytes_before = now.written_end + (region_end.written_end - done->end);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace stagefrontier
