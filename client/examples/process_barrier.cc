#include "client/examples/process_barrier.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace stagefrontier {

// Lives in the shared file; zero-filled on creation.
struct ProcessBarrier::Shared {
  std::atomic<uint32_t> release_gen;
  uint32_t pad[15];
  std::atomic<uint32_t> arrived_gen[kMaxParties];
  std::atomic<int32_t> pid[kMaxParties];  // 0: not started, -1: left
};

absl::StatusOr<std::unique_ptr<ProcessBarrier>> ProcessBarrier::Open(const std::string& path,
                                                                     int rank, int parties) {
  if (parties < 1 || parties > kMaxParties || rank < 0 || rank >= parties) {
    return absl::InvalidArgumentError(
        absl::StrCat("barrier: rank ", rank, " of ", parties, " parties"));
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("barrier ", path, ": ", strerror(errno)));
  if (::ftruncate(fd, sizeof(Shared)) != 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("barrier ", path, ": ", strerror(errno)));
  }
  void* p = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("barrier ", path, ": ", strerror(errno)));
  }
  auto* s = static_cast<Shared*>(p);
  s->pid[rank].store(static_cast<int32_t>(::getpid()));
  return std::unique_ptr<ProcessBarrier>(new ProcessBarrier(s, rank, parties));
}

ProcessBarrier::~ProcessBarrier() { ::munmap(shared_, sizeof(Shared)); }

bool ProcessBarrier::AllArrived(uint32_t gen) const {
  for (int r = 0; r < parties_; ++r) {
    if (shared_->arrived_gen[r].load() >= gen) continue;
    const int32_t pid = shared_->pid[r].load(std::memory_order_acquire);
    if (pid == -1) continue;                                         // finished
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) continue;  // died
    return false;
  }
  return true;
}

void ProcessBarrier::Wait() {
  const uint32_t gen = ++gen_;
  // seq_cst store and loads: two ranks arriving together must each see the other.
  shared_->arrived_gen[rank_].store(gen);
  while (shared_->release_gen.load(std::memory_order_acquire) < gen) {
    if (AllArrived(gen)) {
      uint32_t cur = shared_->release_gen.load();
      while (cur < gen && !shared_->release_gen.compare_exchange_weak(cur, gen)) {
      }
      syscall(SYS_futex, &shared_->release_gen, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
      return;
    }
    // Sleep until woken; wake up now and then to notice a participant that died.
    const uint32_t seen = shared_->release_gen.load(std::memory_order_acquire);
    if (seen >= gen) break;
    timespec timeout{0, 20'000'000};
    syscall(SYS_futex, &shared_->release_gen, FUTEX_WAIT, seen, &timeout, nullptr, 0);
  }
}

void ProcessBarrier::Leave() {
  shared_->pid[rank_].store(-1, std::memory_order_release);
  syscall(SYS_futex, &shared_->release_gen, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

}  // namespace stagefrontier
