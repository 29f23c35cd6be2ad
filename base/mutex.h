// The project's mutex: std::mutex with clang's thread-safety attributes, so that fields can say
// ABSL_GUARDED_BY(mu_) and tests/thread_safety/check.sh proves every access holds the lock.
// Not absl::Mutex: Debian's Abseil is not built with ThreadSanitizer, which then sees none of
// its lock edges and reports every guarded access as a race; std::mutex is pthread underneath,
// which ThreadSanitizer follows.
//
//   mutable Mutex mu_;
//   int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
//   CondVar changed_;
//   void Add() { MutexLock lock(&mu_); ++count_; changed_.NotifyAll(); }
//   void WaitForSome() { MutexLock lock(&mu_); while (count_ == 0) changed_.Wait(&mu_); }
#ifndef STAGEFRONTIER_BASE_MUTEX_H_
#define STAGEFRONTIER_BASE_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace stagefrontier {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable over Mutex. Waiters re-check their condition in a loop; whoever
// changes it calls NotifyAll (after or while holding the mutex).
class CondVar {
 public:
  // Releases `mu`, sleeps until notified (or woken spuriously), takes `mu` again.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: the caller's MutexLock gives it back
  }
  // The same, sleeping at most until `deadline`; false when the deadline passed.
  bool WaitUntil(Mutex* mu, std::chrono::steady_clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool notified = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_BASE_MUTEX_H_
