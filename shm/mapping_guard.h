// Keeps a shared mapping from killing the process when its file is truncated underneath it.
//
// Touching a page of a MAP_SHARED mapping beyond the end of its file raises SIGBUS, and the
// default action kills the process: a trainer, or the sidecar, would die because someone
// truncated a segment file in /dev/shm. A guarded range is watched by one process-wide SIGBUS
// handler (installed on first use): a fault inside the range replaces the whole range with
// private zero pages, so that the faulting access and every later one succeed on memory nobody
// else sees, and marks the range lost. The owner polls lost() (one relaxed load) and stops
// using the segment. A fault anywhere else goes to the handler that was installed before ours
// or, if there was none, kills the process as SIGBUS always did. Wayland compositors guard
// client-owned shared buffers the same way.
//
//   MappingGuard guard = MappingGuard::Watch(base, size);   // after mmap
//   ... if (guard.lost()) { /* the file shrank: stop, say so once */ }
//   guard.Release();                                         // before munmap
//
// Thread-safety: Watch, Release and lost() may be called from any thread. At most
// kMaxGuardedRanges ranges are watched at a time; beyond that Watch returns an unguarded
// MappingGuard (guarded() false), which behaves as a plain mapping.
#ifndef STAGEFRONTIER_SHM_MAPPING_GUARD_H_
#define STAGEFRONTIER_SHM_MAPPING_GUARD_H_

#include <cstddef>
#include <cstdint>

namespace stagefrontier::shm {

inline constexpr int kMaxGuardedRanges = 256;

class MappingGuard {
 public:
  MappingGuard() = default;
  MappingGuard(MappingGuard&& other) noexcept : entry_(other.entry_) { other.entry_ = -1; }
  MappingGuard& operator=(MappingGuard&& other) noexcept;
  MappingGuard(const MappingGuard&) = delete;
  MappingGuard& operator=(const MappingGuard&) = delete;
  ~MappingGuard() { Release(); }

  // Starts watching [base, base + size). Installs the SIGBUS handler the first time. Returns an
  // unguarded guard if the table is full or the handler cannot be installed.
  static MappingGuard Watch(void* base, size_t size);

  // Stops watching (idempotent). Call before unmapping the range.
  void Release();

  bool guarded() const { return entry_ >= 0; }
  // True once a fault inside the range replaced it with private zero pages.
  bool lost() const;

  // Faults inside watched ranges handled since the process started (for tests and health).
  static uint64_t faults_handled();

 private:
  explicit MappingGuard(int entry) : entry_(entry) {}
  int entry_ = -1;
};

}  // namespace stagefrontier::shm

#endif  // STAGEFRONTIER_SHM_MAPPING_GUARD_H_
