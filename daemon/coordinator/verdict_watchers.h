// The WatchVerdicts streams on gRPC's callback API: any number of watchers is served by one pump
// thread and gRPC's callback threads, never a thread per watcher (a sync server holds one
// thread for each open stream).
//
//   VerdictWatchers watchers(jobs.verdict_bell());
//   // in QueryService::WatchVerdicts(CallbackServerContext*, request):
//   return watchers.Watch(job, request->after_seq(), request->held_only());
//   ...
//   watchers.Shutdown();  // ends every watch with OK before the server shuts down
//
// Each watch sends the held verdicts after its `after_seq`, then (unless held_only) each new one
// as its job appends it. A watch holds at most kBatch events it has not sent yet: a watcher that
// does not read stalls only its own stream (gRPC's flow control) and, if it falls behind the
// job's kept verdicts (JobOptions::verdicts_kept), skips the ones dropped meanwhile, as the
// synchronous stream did. The pump is woken by the jobs' VerdictBell and looks at idle watches
// only; a watch busy writing asks its job for more itself when the write completes.
//
// Thread-safe. The object must outlive the gRPC server that serves the watches.
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_VERDICT_WATCHERS_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_VERDICT_WATCHERS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "daemon/coordinator/job_state.h"
#include "daemon/events/verdict_bell.h"
#include "grpcpp/grpcpp.h"
#include "stagefrontier/v1/query.pb.h"

namespace stagefrontier {

class VerdictWatch;

class VerdictWatchers {
 public:
  // Events a watch fetches from its job at a time (the most it holds unsent).
  static constexpr size_t kBatch = 64;

  // Starts the pump thread; `bell` is what the jobs ring (JobRegistry::verdict_bell()).
  explicit VerdictWatchers(VerdictBell* bell);
  ~VerdictWatchers();  // Shutdown()
  VerdictWatchers(const VerdictWatchers&) = delete;
  VerdictWatchers& operator=(const VerdictWatchers&) = delete;

  // A stream of `job`'s verdicts with seq > after_seq (see the top). After Shutdown: a stream
  // that ends at once with UNAVAILABLE.
  grpc::ServerWriteReactor<v1::VerdictEvent>* Watch(std::shared_ptr<JobState> job,
                                                    int64_t after_seq, bool held_only);

  // A stream that ends at once with `status` (a refused call: token, unknown job).
  static grpc::ServerWriteReactor<v1::VerdictEvent>* Refuse(grpc::Status status);

  // Ends every live watch with OK, refuses new ones and stops the pump. Idempotent.
  void Shutdown();

  // Live watches (held_only ones not counted: they end by themselves).
  size_t live() const;

 private:
  friend class VerdictWatch;
  void Forget(VerdictWatch* watch);
  void Pump();

  VerdictBell* bell_;
  mutable Mutex mu_;
  std::map<VerdictWatch*, std::shared_ptr<VerdictWatch>> live_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stopping_{false};
  std::thread pump_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_VERDICT_WATCHERS_H_
