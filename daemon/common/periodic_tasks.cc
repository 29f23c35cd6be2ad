#include "daemon/common/periodic_tasks.h"

#include <utility>

#include "daemon/common/thread_name.h"

namespace stagefrontier {

PeriodicTasks::PeriodicTasks(std::string name, std::chrono::nanoseconds tick, Clock now)
    : name_(std::move(name)), tick_(tick), now_(now ? std::move(now) : [] {
        return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
      }) {}

PeriodicTasks::~PeriodicTasks() { Stop(); }

void PeriodicTasks::Add(std::string name, std::chrono::nanoseconds period, Task task) {
  Entry e;
  e.name = std::move(name);
  e.period_ns = period.count();
  e.task = std::move(task);
  tasks_.push_back(std::move(e));
}

void PeriodicTasks::RunDue(int64_t now_ns) {
  for (Entry& e : tasks_) {
    if (e.ran && now_ns < e.next_ns) continue;
    e.task(now_ns);
    e.ran = true;
    e.next_ns = now_ns + e.period_ns;
  }
}

void PeriodicTasks::Start() {
  thread_ = std::thread([this] {
    NameThisThread(name_);
    while (!stop_) {
      RunDue(now_());
      // Woken early by Stop(), so that a long tick does not delay shutdown.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, tick_, [this] { return stop_.load(); });
    }
  });
}

void PeriodicTasks::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<std::string> PeriodicTasks::TaskNames() const {
  std::vector<std::string> names;
  for (const Entry& e : tasks_) names.push_back(e.name);
  return names;
}

}  // namespace stagefrontier
