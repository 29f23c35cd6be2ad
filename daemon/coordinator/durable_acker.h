// Group commit for batch acknowledgements. An ingest stream hands over each batch's ack with
// the jobs it wrote to; a background thread flushes (and fsyncs) those jobs' journals once for
// everything queued, then writes the acks, in order per stream. The stream's reader never
// waits for the disk, so a slow fsync delays acknowledgements, not accounting or verdicts.
//
//   DurableAcker acker(&metrics, log);
//   acker.Enqueue(session, std::move(reply), {job_a, job_b});
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_DURABLE_ACKER_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_DURABLE_ACKER_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "daemon/coordinator/job_state.h"
#include "daemon/coordinator/sidecar_sessions.h"

namespace stagefrontier {

class DurableAcker {
 public:
  using Log = std::function<void(const std::string&)>;
  explicit DurableAcker(Log log = nullptr);
  // Flushes and sends what is queued, then stops the thread.
  ~DurableAcker();
  DurableAcker(const DurableAcker&) = delete;
  DurableAcker& operator=(const DurableAcker&) = delete;

  // Writes `reply` to `session` once every job in `jobs` has made durable what was journaled
  // before this call. Acks of one session go out in the order they were queued.
  void Enqueue(std::shared_ptr<SidecarSessions::Session> session, v1::CoordinatorMessage reply,
               std::vector<std::shared_ptr<JobState>> jobs);

 private:
  struct Pending {
    std::shared_ptr<SidecarSessions::Session> session;
    v1::CoordinatorMessage reply;
    std::vector<std::pair<std::shared_ptr<JobState>, uint64_t>> targets;
  };
  void Run();
  // One round: flush, then send what became durable. Returns false if nothing was queued.
  bool Round();
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); }

  Log log_;
  Mutex mu_;
  CondVar work_;  // queue_ or stop_ changed
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_DURABLE_ACKER_H_
