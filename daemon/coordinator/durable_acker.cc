#include "daemon/coordinator/durable_acker.h"

#include <chrono>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "daemon/common/thread_name.h"

namespace stagefrontier {

DurableAcker::DurableAcker(Log log)
    : log_(std::move(log)), thread_([this] {
        NameThisThread("acker");
        Run();
      }) {}

DurableAcker::~DurableAcker() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  work_.NotifyAll();
  thread_.join();
}

void DurableAcker::Enqueue(std::shared_ptr<SidecarSessions::Session> session,
                           v1::CoordinatorMessage reply,
                           std::vector<std::shared_ptr<JobState>> jobs) {
  Pending p{std::move(session), std::move(reply), {}};
  for (auto& job : jobs) {
    const uint64_t position = job->JournalPosition();
    p.targets.emplace_back(std::move(job), position);
  }
  {
    MutexLock lock(&mu_);
    queue_.push_back(std::move(p));
  }
  work_.NotifyAll();
}

void DurableAcker::Run() {
  for (;;) {
    {
      MutexLock lock(&mu_);
      while (!HasWork()) work_.Wait(&mu_);
      if (stop_ && queue_.empty()) return;
    }
    Round();
    std::deque<Pending> rest;
    {
      MutexLock lock(&mu_);
      if (!stop_) continue;
      rest.swap(queue_);
    }
    // Last round for what is still queued; a failing disk does not hold shutdown up.
    for (Pending& p : rest) {
      bool durable = true;
      for (auto& [job, position] : p.targets) {
        durable = durable && job->Flush().ok() && job->DurableUpTo(position);
      }
      if (durable) p.session->Write(p.reply);
    }
    return;
  }
}

bool DurableAcker::Round() {
  std::deque<Pending> batch;
  {
    MutexLock lock(&mu_);
    batch.swap(queue_);
  }
  if (batch.empty()) return false;
  std::set<JobState*> flushed, failed;
  for (const Pending& p : batch) {
    for (const auto& [job, position] : p.targets) {
      if (flushed.count(job.get()) || failed.count(job.get())) continue;
      if (absl::Status s = job->Flush(); !s.ok()) {
        failed.insert(job.get());
        if (log_) log_(absl::StrCat("job ", job->name(), ": ", s.message(), " (acks wait)"));
      } else {
        flushed.insert(job.get());
      }
    }
  }
  std::set<SidecarSessions::Session*> blocked;
  std::deque<Pending> retry;
  for (Pending& p : batch) {
    bool durable = blocked.count(p.session.get()) == 0;
    for (const auto& [job, position] : p.targets) durable = durable && job->DurableUpTo(position);
    if (durable) {
      p.session->Write(p.reply);
    } else {
      blocked.insert(p.session.get());  // later acks of this stream wait behind it
      retry.push_back(std::move(p));
    }
  }
  if (!retry.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a failing disk: back off
    MutexLock lock(&mu_);
    queue_.insert(queue_.begin(), std::make_move_iterator(retry.begin()),
                  std::make_move_iterator(retry.end()));
  }
  return true;
}

}  // namespace stagefrontier
