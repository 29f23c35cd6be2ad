// The sidecars connected to the coordinator right now, and which (job, rank) each serves, so
// that a control request reaches the node whose segment holds that rank's slot.
//
//   auto session = sessions.Add("node-a", "node-a/77/9f..", "10.0.0.5", writer);  // at Hello
//   if (!session.ok()) ...  // another sidecar holds node-a: refused, counted, node flagged
//   sessions.Bind(session, "run42", 3);                 // rank 3 declared on that stream
//   int reached = sessions.Send(request);               // a ControlRequestSender
//   sessions.Remove(session);                           // before the stream is freed
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_SIDECAR_SESSIONS_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_SIDECAR_SESSIONS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "daemon/events/control_request_sender.h"
#include "stagefrontier/v1/ingest.pb.h"

namespace stagefrontier {

// Where a session's messages go: the ingest stream's bounded outbound queue. Send never
// blocks; it returns false when the stream is gone, or when the stream does not read what it
// is sent and was cut off for it.
class SessionWriter {
 public:
  virtual ~SessionWriter() = default;
  virtual bool Send(const v1::CoordinatorMessage& message) = 0;
};

class SidecarSessions : public ControlRequestSender {
 public:
  struct Session {
    explicit Session(SessionWriter* w) : writer(w) {}
    uint64_t id = 0;
    std::string node;
    std::string sidecar_id;
    // When its stream last delivered a message (steady clock, ns): a holder whose streams have
    // all been silent for stale_after_ns gives its node name way (a crashed machine's
    // half-open connections must not lock its restarted sidecar out).
    std::atomic<int64_t> last_seen_ns{0};
    // Queues one message for the stream; false once the stream is gone. Never blocks.
    bool Write(const v1::CoordinatorMessage& msg);

   private:
    friend class SidecarSessions;
    Mutex mu;  // Remove waits for a Send in progress
    SessionWriter* writer ABSL_GUARDED_BY(mu) = nullptr;
  };

  // A node name is held by the sidecar process (sidecar id, from one address) whose streams are
  // connected under it; that sidecar's further streams (one per coordinator lane, reconnects)
  // are welcome. Another sidecar claiming a held node is refused with AlreadyExists, counted,
  // and the node is flagged in conflict for an hour (InConflict) — unless every stream of the
  // holder has been silent for stale_after_ns (a sidecar sends a batch or its health at least
  // every 4.5 s): then the holder is taken for gone and the newcomer holds the name. `now_ns`:
  // steady clock.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<Session>> Add(std::string node,
                                                             std::string sidecar_id,
                                                             std::string address,
                                                             SessionWriter* writer,
                                                             int64_t now_ns = 0);
  // The session's stream delivered a message at `now_ns`. Cheap: one relaxed store.
  static void Touch(Session& session, int64_t now_ns) {
    session.last_seen_ns.store(now_ns, std::memory_order_relaxed);
  }
  void set_stale_after_ns(int64_t ns) {
    MutexLock lock(&mu_);
    stale_after_ns_ = ns;
  }
  // Forgets the session and waits for any Send in flight: the writer may be freed after.
  void Remove(const std::shared_ptr<Session>& session);
  // Records that `session` serves (job, rank); returns true if it did not already.
  bool Bind(const std::shared_ptr<Session>& session, const std::string& job, int32_t rank);
  // Forgets `job`'s ranks that `session` (or a session gone since) serves: the stream forgot
  // the job (it went idle), and nothing is kept per job ever seen.
  void Forget(const std::shared_ptr<Session>& session, const std::string& job);

  // Sends `request` to the session serving (job, rank), or to every session serving some
  // rank of the job when rank is -1. Returns how many sessions it reached.
  int Send(const v1::ControlRequest& request) override;
  size_t size() const;

  // Why `node`'s identity is in doubt (a second sidecar claimed it within the last hour), or
  // empty. The drain hook never acts on such a node.
  std::string InConflict(const std::string& node) const;
  uint64_t conflicts() const;
  // (job, rank) slots looked at by Remove and Forget so far (tests: their cost is the
  // session's own bindings, not every rank of every job).
  int64_t slot_visits() const;

 private:
  struct Holder {
    std::string sidecar_id;
    std::string address;
    int streams = 0;
  };
  struct Conflict {
    std::chrono::steady_clock::time_point at;
    std::string what;
  };
  mutable Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t conflicts_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t stale_after_ns_ ABSL_GUARDED_BY(mu_) = 30'000'000'000;
  std::map<std::string, Holder> holders_ ABSL_GUARDED_BY(mu_);       // by node
  std::map<std::string, Conflict> conflicted_ ABSL_GUARDED_BY(mu_);  // by node
  std::map<uint64_t, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, int32_t>, std::weak_ptr<Session>> by_rank_ ABSL_GUARDED_BY(mu_);
  // The slots each session was bound to, by session id then job, so that Remove and Forget
  // touch only those: scanning by_rank_ instead made 12,500 streams of a 100,000-rank job
  // disconnecting cost 1.25e9 steps under mu_ (68 s of coordinator CPU in the load harness,
  // every Bind and Send waiting behind it).
  std::map<uint64_t, std::map<std::string, std::set<int32_t>>> bound_ ABSL_GUARDED_BY(mu_);
  int64_t slot_visits_ ABSL_GUARDED_BY(mu_) = 0;
  // Erases the (job, rank) slot if `session` holds it or its holder is gone.
  void UnbindLocked(const std::shared_ptr<Session>& session, const std::string& job, int32_t rank)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_SIDECAR_SESSIONS_H_
