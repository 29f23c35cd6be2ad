#include "daemon/coordinator/journal_compactor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
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
  if (was.written_end < was.compacted_end + options.min_plain_bytes) return result;
  absl::StatusOr<int> in_fd = journal.OpenForReading();
  if (!in_fd.ok()) return in_fd.status();
  TempFile in("", *in_fd);  // a descriptor only: nothing to remove
  const std::string& path = journal.path();

  // The region: whole frames from the end of the compacted prefix.
  const uint64_t region_bytes =
      std::min<uint64_t>(was.written_end - was.compacted_end, options.max_region_bytes);
  std::string region;
  if (absl::Status s = PreadExactly(in.fd(), was.compacted_end, region_bytes, "cannot read journal",
                                    path, &region);
      !s.ok()) {
    return s;
  }
  const std::string temp_path = HiddenSiblingPath(path, ".compacting");
  const int out_fd =
      ::open(temp_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (out_fd < 0) return ErrnoStatus(errno, "cannot create", temp_path);
  TempFile out(temp_path, out_fd);

  // The compacted prefix, copied as it is (in the kernel).
  for (uint64_t copied = 0; copied < was.compacted_end;) {
    loff_t from = static_cast<loff_t>(copied), to = static_cast<loff_t>(copied);
    const ssize_t n = ::copy_file_range(in.fd(), &from, out.fd(), &to,
                                        static_cast<size_t>(was.compacted_end - copied), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return ErrnoStatus(n < 0 ? errno : EIO, "cannot copy the compacted prefix of", path);
    copied += static_cast<uint64_t>(n);
  }
  uint64_t written = was.compacted_end;
  RecordBlockBuilder builder({.stage_count = stage_count, .zstd_level = options.zstd_level},
                             options.block_steps, options.verify_every);
  std::string frames, payload;
  auto emit = [&](v1::JournalRecord block) {
    payload.clear();
    block.SerializeToString(&payload);
    AppendJournalFrame(payload, &frames);
  };
  size_t off = 0;
  v1::JournalRecord record;
  while (off < region.size()) {
    const size_t n = ReadJournalFrame(region, off, &record);
    if (n == 0) break;  // the region's end cut a frame: it waits for the next compaction
    if (record.has_block() || record.has_declared()) {
      return absl::DataLossError(absl::StrCat(
          "journal ", path, ": a ", record.has_block() ? "record block" : "declaration",
          " at offset ", was.compacted_end + off, " among the plain records; not compacted"));
    }
    if (absl::Status s = builder.Add(std::move(record), emit); !s.ok()) return s;
    ++result.records;
    off += n;
  }
  if (off == 0) {
    return absl::DataLossError(absl::StrCat("journal ", path, ": no intact record within ",
                                            region.size(), " bytes at offset ", was.compacted_end,
                                            "; not compacted"));
  }
  if (absl::Status s = builder.Finish(emit); !s.ok()) return s;
  if (absl::Status s = PwriteAll(out.fd(), frames, written, "cannot write", temp_path); !s.ok()) {
    return s;
  }
  written += frames.size();
  const uint64_t new_compacted_end = written;
  const RecordLog::Layout region_end{was.compacted_end, was.compacted_end + off};
  if (new_compacted_end >= region_end.written_end) {
    result.records = 0;  // would not shrink (a tiny region): leave it for a larger one
    return result;
  }
  // ReplacePrefix appends what follows the region; it takes the file (or removes it).
  out.Release();
  if (absl::Status s = journal.ReplacePrefix(region_end, temp_path, new_compacted_end); !s.ok()) {
    return s;
  }
  result.blocks = builder.blocks();
  const RecordLog::Layout now = journal.CurrentLayout();
  result.file_bytes_after = now.written_end;
  result.file_bytes_before = now.written_end + (region_end.written_end - new_compacted_end);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace stagefrontier
