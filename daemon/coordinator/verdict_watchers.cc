#include "daemon/coordinator/verdict_watchers.h"

#include <chrono>
#include <deque>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "daemon/common/refused_stream.h"
#include "daemon/common/thread_name.h"

namespace stagefrontier {

// One WatchVerdicts stream. gRPC calls its reactions on its callback threads; the pump calls
// Advance when the bell rang. Every path that starts a write or finishes goes through Advance,
// which decides under mu_ and calls gRPC after releasing it: gRPC may run a reaction (OnDone
// among them) inline in the thread that starts an operation.
class VerdictWatch final : public grpc::ServerWriteReactor<v1::VerdictEvent> {
 public:
  VerdictWatch(VerdictWatchers* owner, std::shared_ptr<JobState> job, int64_t after_seq,
               bool held_only)
      : owner_(owner), job_(std::move(job)), after_(after_seq), held_only_(held_only) {}

  // Writes the next verdict if none is being written and one is there; finishes when the watch
  // was cancelled or stopped, or (held_only) nothing is left.
  void Advance() {
    enum class Next { kNothing, kWrite, kFinish };
    Next next = Next::kNothing;
    grpc::Status status = grpc::Status::OK;
    {
      MutexLock lock(&mu_);
      if (writing_ || finished_) return;
      if (cancelled_) {
        status = grpc::Status(grpc::CANCELLED, "the watcher went away");
        next = Next::kFinish;
      } else if (stopped_) {
        next = Next::kFinish;
      } else {
        if (pending_.empty()) {
          for (v1::VerdictEvent& ev : job_->VerdictsAfter(after_, VerdictWatchers::kBatch)) {
            pending_.push_back(std::move(ev));
          }
        }
        if (!pending_.empty()) {
          current_ = std::move(pending_.front());
          pending_.pop_front();
          after_ = current_.seq();
          writing_ = true;
          next = Next::kWrite;
        } else if (held_only_) {
          next = Next::kFinish;
        }
      }
      if (next == Next::kFinish) finished_ = true;
    }
    if (next == Next::kWrite) {
      StartWrite(&current_);
    } else if (next == Next::kFinish) {
      Finish(status);
    }
  }

  // Ends the stream with OK after the write in flight (shutdown).
  void Stop() {
    {
      MutexLock lock(&mu_);
      stopped_ = true;
    }
    Advance();
  }

  void OnWriteDone(bool ok) override {
    {
      MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) cancelled_ = true;
    }
    Advance();
  }

  void OnCancel() override {
    {
      MutexLock lock(&mu_);
      cancelled_ = true;
    }
    Advance();
  }

  void OnDone() override {
    if (!held_only_) owner_->Forget(this);
    // The pump may still hold a reference; the last one deletes the watch.
    std::shared_ptr<VerdictWatch> keep = std::move(self_);
  }

 private:
  friend class VerdictWatchers;

  VerdictWatchers* const owner_;
  const std::shared_ptr<JobState> job_;
  std::shared_ptr<VerdictWatch> self_;  // until OnDone
  Mutex mu_;
  int64_t after_ ABSL_GUARDED_BY(mu_);  // the newest seq taken from the job
  const bool held_only_;
  std::deque<v1::VerdictEvent> pending_ ABSL_GUARDED_BY(mu_);  // at most kBatch
  v1::VerdictEvent current_ ABSL_GUARDED_BY(mu_);              // the one being written
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

VerdictWatchers::VerdictWatchers(VerdictBell* bell) : bell_(bell) {
  pump_ = std::thread([this] {
    NameThisThread("verdict-pump");
    Pump();
  });
}

VerdictWatchers::~VerdictWatchers() { Shutdown(); }

grpc::ServerWriteReactor<v1::VerdictEvent>* VerdictWatchers::Watch(std::shared_ptr<JobState> job,
                                                                   int64_t after_seq,
                                                                   bool held_only) {
  std::shared_ptr<VerdictWatch> watch;
  {
    MutexLock lock(&mu_);  // a watch registered after Shutdown would live on
    if (!stopping_) {
      watch = std::make_shared<VerdictWatch>(this, std::move(job), after_seq, held_only);
      watch->self_ = watch;
      if (!held_only) live_.emplace(watch.get(), watch);
    }
  }
  if (watch == nullptr) {
    return Refuse(grpc::Status(grpc::UNAVAILABLE, "the coordinator is shutting down"));
  }
  // Operations started before the reactor is returned wait for gRPC to bind it: no reaction
  // can run before this returns.
  watch->Advance();
  return watch.get();
}

grpc::ServerWriteReactor<v1::VerdictEvent>* VerdictWatchers::Refuse(grpc::Status status) {
  return RefuseStream<grpc::ServerWriteReactor<v1::VerdictEvent>>(std::move(status));
}

void VerdictWatchers::Shutdown() {
  std::vector<std::shared_ptr<VerdictWatch>> watches;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    for (const auto& [ptr, watch] : live_) watches.push_back(watch);
  }
  for (const auto& watch : watches) watch->Stop();
  bell_->Ring();  // wakes the pump to see stopping_
  if (pump_.joinable()) pump_.join();
}

size_t VerdictWatchers::live() const {
  MutexLock lock(&mu_);
  return live_.size();
}

void VerdictWatchers::Forget(VerdictWatch* watch) {
  MutexLock lock(&mu_);
  live_.erase(watch);
}

void VerdictWatchers::Pump() {
  uint64_t seen = bell_->rings();
  std::vector<std::shared_ptr<VerdictWatch>> watches;
  while (!stopping_) {
    // The timeout is a safety net only: every appended verdict rings the bell.
    seen = bell_->WaitAfter(seen, std::chrono::seconds(1));
    if (stopping_) break;
    {
      MutexLock lock(&mu_);
      for (const auto& [ptr, watch] : live_) watches.push_back(watch);
    }
    for (const auto& watch : watches) watch->Advance();
    watches.clear();  // a finished watch is deleted by whoever lets go last
  }
}

}  // namespace stagefrontier
