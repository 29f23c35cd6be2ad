#include "shm/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <mutex>

namespace stagefrontier::shm {
namespace {

struct Range {
  std::atomic<uintptr_t> base{0};  // 0: free entry
  std::atomic<size_t> size{0};
  std::atomic<uint32_t> lost{0};
};

// Read by the signal handler: plain atomics only, no locks, no allocation.
Range g_ranges[kMaxGuardedRanges];
std::atomic<uint64_t> g_faults{0};
struct sigaction g_previous;
std::atomic<bool> g_installed{false};
std::mutex g_install_mu;

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info != nullptr ? info->si_addr : nullptr);
  for (Range& r : g_ranges) {
    const uintptr_t base = r.base.load(std::memory_order_acquire);
    if (base == 0) continue;
    const size_t size = r.size.load(std::memory_order_acquire);
    if (addr < base || addr - base >= size) continue;
    // mmap is async-signal-safe (a system call). The range keeps its address: pointers into
    // it stay valid, they now point at private zeros. MAP_NORESERVE: a segment's size is its
    // writer's to choose, and a private mapping larger than memory and swap is refused
    // without it (the process then died of the SIGBUS).
    void* p = mmap(reinterpret_cast<void*>(base), size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      r.lost.store(1, std::memory_order_release);
      g_faults.fetch_add(1, std::memory_order_relaxed);
      return;  // the faulting access is retried and succeeds
    }
    break;
  }
  // Not ours (or the remap failed): what would have happened without us.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  // Default action: restore it; returning re-executes the access, which faults again and
  // terminates the process with SIGBUS as if we had never been there.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGBUS, &dfl, nullptr);
}

bool Install() {
  if (g_installed.load(std::memory_order_acquire)) return true;
  std::lock_guard<std::mutex> lock(g_install_mu);
  if (g_installed.load(std::memory_order_relaxed)) return true;
  struct sigaction sa {};
  sa.sa_sigaction = &OnSigbus;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGBUS, &sa, &g_previous) != 0) return false;
  g_installed.store(true, std::memory_order_release);
  return true;
}

}  // namespace

MappingGuard& MappingGuard::operator=(MappingGuard&& other) noexcept {
  if (this != &other) {
    Release();
    entry_ = other.entry_;
    other.entry_ = -1;
  }
  return *this;
}

MappingGuard MappingGuard::Watch(void* base, size_t size) {
  if (base == nullptr || size == 0 || !Install()) return MappingGuard();
  for (int i = 0; i < kMaxGuardedRanges; ++i) {
    uintptr_t expected = 0;
    Range& r = g_ranges[i];
    // Claim the entry with a placeholder, fill it, then publish the real base.
    if (!r.base.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
    r.size.store(size, std::memory_order_release);
    r.lost.store(0, std::memory_order_release);
    r.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    return MappingGuard(i);
  }
  return MappingGuard();
}

void MappingGuard::Release() {
  if (entry_ < 0) return;
  Range& r = g_ranges[entry_];
  r.size.store(0, std::memory_order_release);
  r.base.store(0, std::memory_order_release);
  entry_ = -1;
}

bool MappingGuard::lost() const {
  return entry_ >= 0 && g_ranges[entry_].lost.load(std::memory_order_relaxed) != 0;
}

uint64_t MappingGuard::faults_handled() { return g_faults.load(std::memory_order_relaxed); }

}  // namespace stagefrontier::shm
