// A bell every job rings when it appended verdicts, so one thread can wait for new verdicts of
// any job (the verdict watchers' pump, verdict_watchers.h) instead of one thread per job. It is
// one of the jobs' observers (verdict_observer.h): OnVerdictsAppended rings it.
//
//   VerdictBell bell;                       // in JobOptions::observers (JobRegistry adds its own)
//   uint64_t seen = bell.rings();
//   seen = bell.WaitAfter(seen, std::chrono::seconds(1));  // returns on a ring or the timeout
//
// Thread-safe. Ring() takes only the bell's own mutex, briefly: jobs ring it with their lock
// held, so a waiter must not hold a lock that is taken while calling into jobs.
#ifndef STAGEFRONTIER_DAEMON_EVENTS_VERDICT_BELL_H_
#define STAGEFRONTIER_DAEMON_EVENTS_VERDICT_BELL_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "daemon/events/verdict_observer.h"

namespace stagefrontier {

class VerdictBell : public VerdictObserver {
 public:
  void OnVerdictsAppended() override { Ring(); }

  void Ring() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++rings_;
    }
    cv_.notify_all();
  }

  // How many times the bell rang so far.
  uint64_t rings() const {
    std::lock_guard<std::mutex> lock(mu_);
    return rings_;
  }

  // Waits until the bell has rung more than `seen` times or `timeout` passed; returns the
  // count of rings then (== seen: timed out).
  uint64_t WaitAfter(uint64_t seen, std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return rings_ != seen; });
    return rings_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  uint64_t rings_ = 0;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_EVENTS_VERDICT_BELL_H_
