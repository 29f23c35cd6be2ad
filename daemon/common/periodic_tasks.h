// Named periodic duties on one thread: each runs at its own period, in the order added, on a
// short tick, so that a daemon's main loop is a list of named functions rather than one lambda
// with counters. Stop() ends the thread after the running duty returns; a long duty checks
// stopping() between its items.
//
//   PeriodicTasks tasks("ticker", std::chrono::milliseconds(10), shm::MonotonicNowNs);
//   tasks.Add("step-deadlines", std::chrono::nanoseconds(0), [&](int64_t now) { Close(now); });
//   tasks.Add("upload-sweep", std::chrono::seconds(60), [&](int64_t) { Sweep(); });
//   tasks.Start();
//   ...
//   tasks.Stop();
#ifndef STAGEFRONTIER_DAEMON_COMMON_PERIODIC_TASKS_H_
#define STAGEFRONTIER_DAEMON_COMMON_PERIODIC_TASKS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace stagefrontier {

class PeriodicTasks {
 public:
  // A duty, given the clock's time (ns) of the tick that runs it.
  using Task = std::function<void(int64_t now_ns)>;
  using Clock = std::function<int64_t()>;

  // `now` defaults to std::chrono::steady_clock in ns.
  explicit PeriodicTasks(std::string name,
                         std::chrono::nanoseconds tick = std::chrono::milliseconds(10),
                         Clock now = nullptr);
  ~PeriodicTasks();  // Stop()
  PeriodicTasks(const PeriodicTasks&) = delete;
  PeriodicTasks& operator=(const PeriodicTasks&) = delete;

  // Adds a duty run at the first tick, then whenever `period` has passed since its last run
  // (0: every tick). Before Start() only.
  void Add(std::string name, std::chrono::nanoseconds period, Task task);

  // One tick at `now_ns`: runs the due duties in the order added. Start() calls it every
  // tick; tests call it directly.
  void RunDue(int64_t now_ns);

  // Runs the ticks on a thread of its own until Stop().
  void Start();
  // Asks the thread to end and joins it; safe to call twice, or without Start().
  void Stop();
  bool stopping() const { return stop_.load(); }

  const std::string& name() const { return name_; }
  // Names of the duties, in run order (for logs and tests).
  std::vector<std::string> TaskNames() const;

 private:
  struct Entry {
    std::string name;
    int64_t period_ns = 0;
    Task task;
    bool ran = false;
    int64_t next_ns = 0;
  };

  const std::string name_;
  const std::chrono::nanoseconds tick_;
  const Clock now_;
  std::vector<Entry> tasks_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COMMON_PERIODIC_TASKS_H_
