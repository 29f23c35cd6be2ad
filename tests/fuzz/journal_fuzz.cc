// Fuzz target: arbitrary bytes as a coordinator journal (docs/journal-format.md), restored
// the way the coordinator restores one at startup: framing, checksums, records, then replay
// into a job (decoding packed steps, aligning, accounting). Restore must succeed (cutting a
// damaged tail) or fail with a clear status, never crash.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "daemon/coordinator/job_journal.h"
#include "daemon/coordinator/job_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)stagefrontier::ScanJournal(
      absl::string_view(reinterpret_cast<const char*>(data), size),
      [](const stagefrontier::v1::JournalRecord&) { return absl::OkStatus(); });
  const int fd = memfd_create("journal", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  stagefrontier::JobOptions o;
  o.fsync = false;
  o.history_steps = 64;
  o.history_rank_steps = 4096;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  auto job = stagefrontier::JobState::Restore(path, o, nullptr, nullptr, 0);
  if (job.ok()) {
    stagefrontier::v1::JobInfo info;
    (*job)->Info(&info);
  }
  job = absl::StatusOr<std::unique_ptr<stagefrontier::JobState>>(absl::UnknownError("done"));
  close(fd);
  return 0;
}
