// One sidecar's ingest stream on the coordinator (proto/stagefrontier/v1/ingest.proto), served
// with gRPC's callback API: no thread of its own, a bounded outbound queue, and every way a
// stream can go wrong ends only that stream, with a specific status, a log line and a counter.
//
// The stream parses its messages itself (raw bytes in, so that garbage is told apart from a
// clean end of stream), registers the sidecar's session at Hello, declares ranks (creating
// jobs), decodes, journals and aligns batches, and hands each batch's acknowledgement to the
// DurableAcker, which sends it once durable. Control requests go down the same stream.
// Problems with one rank's records are refused in the acknowledgement (counted; the sidecar
// drops them); the stream goes on.
//
//   IngestStream* s = new IngestStream(deps, context, id, on_done);   // by IngestService
//   s->Start();                                                      // deletes itself at end
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_INGEST_STREAM_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_INGEST_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "daemon/accounting/engine_config.h"
#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/coordinator/durable_acker.h"
#include "daemon/coordinator/job_registry.h"
#include "daemon/coordinator/resource_limits.h"
#include "daemon/coordinator/self_tests.h"
#include "daemon/coordinator/sidecar_sessions.h"
#include "daemon/coordinator/stall_watch.h"
#include "daemon/coordinator/step_aligner.h"
#include "daemon/events/capture_answer_observer.h"
#include "daemon/nodes/node_ledger.h"
#include "grpcpp/grpcpp.h"
#include "stagefrontier/v1/ingest.pb.h"

namespace stagefrontier {

// What a coordinator tells each sidecar after its Hello (v1::StreamLimits): the sidecar keeps its
// health cadence and its batching inside them.
struct SidecarTerms {
  int64_t silent_after_ns = StallOptions{}.silent_ns;  // the stall watch's silence limit
  int64_t step_deadline_ns = AlignerOptions{}.deadline_ns;
  int64_t stall_after_ns = StallOptions{}.floor_ns;
  int64_t window_steps = EngineConfig{}.window_steps;
};

// What every ingest stream of a coordinator shares.
struct IngestDeps {
  JobRegistry* jobs = nullptr;
  SidecarSessions* sessions = nullptr;
  CoordinatorMetrics* metrics = nullptr;
  DurableAcker* acker = nullptr;
  std::string token;
  ResourceLimits limits;
  std::function<void(const std::string&)> log;
  SelfTestBook* self_tests = nullptr;  // null: self-test answers are not followed
  NodeLedger* nodes = nullptr;         // null: the machines under node names are not noted
  CaptureAnswerObserver* capture_answers = nullptr;  // null: capture answers are not followed
  // Told to each sidecar after its Hello (StreamLimits, beside limits.idle_timeout_ms).
  SidecarTerms terms;
};

class IngestStream final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                           public SessionWriter {
 public:
  // `on_done(id)` runs when the stream has ended, right before it deletes itself.
  IngestStream(const IngestDeps& deps, grpc::CallbackServerContext* context, uint64_t id,
               int64_t created_ns, std::function<void(uint64_t)> on_done);

  // Checks the token and starts reading. Call once, after registering the stream.
  void Start();

  // SessionWriter: queues a message for the sidecar. Never blocks. A stream that lets more
  // than limits.max_stream_queue messages pile up (it does not read them) is cut off, so that
  // it cannot hold up anything else; returns false then, and once the stream has ended.
  bool Send(const v1::CoordinatorMessage& message) override;

  // Ends the stream (DEADLINE_EXCEEDED, counted) if no Hello came within
  // limits.hello_timeout_ms of its creation. True once the stream needs no more checks (its
  // Hello came, or it was ended now). Thread-safe.
  bool CheckHelloDeadline(int64_t now_ns);
  // Ends the stream (DEADLINE_EXCEEDED, counted once) if it delivered nothing for
  // limits.idle_timeout_ms since its Hello or its last message (0: never). Thread-safe.
  void CheckIdle(int64_t now_ns);

 private:
  struct Declared {
    std::shared_ptr<JobState> job;
    absl::Status status;
    // The existing job whose declaration this one contradicted (another schema or world
    // size): its health shows the rank refused and counts the records refused.
    std::shared_ptr<JobState> refused_by;
    v1::RankDeclaration declaration;  // for the job's next generation, on a re-run
  };
  // Ingest said new_run for rank `rs` of `d`'s job: starts (or finds) the job's next
  // generation, moves `d` there and ingests into it. nullopt when the stream ended.
  std::optional<absl::StatusOr<IngestCounts>> FollowNewRun(Declared& d, const v1::RankSteps& rs,
                                                           const IngestCounts& c, int64_t now);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // Finishes the stream once; a non-OK code is logged and counted (and `cut_reason`, if any,
  // in stagefrontier_ingest_streams_cut_total). With `cancel`, pending writes are abandoned.
  void End(grpc::StatusCode code, const std::string& message, const char* cut_reason = nullptr,
           bool cancel = false);
  // Message handlers; false when the stream ended.
  bool OnHello(const v1::Hello& hello);
  bool OnBatch(const v1::StepBatch& batch);
  // What a batch's RankSteps produce: the ack's counts and refusals, control requests to
  // send after it, and the jobs whose steps may close now (each once, in first-touch order).
  struct BatchReply {
    v1::BatchAck* ack = nullptr;
    std::vector<v1::ControlRequest> to_send;
    std::set<JobState*> touched;
    std::vector<std::shared_ptr<JobState>> touched_jobs;
  };
  // One rank's steps of a batch into its job; false when the stream ended.
  bool OnRankSteps(const v1::RankSteps& rs, int64_t now, BatchReply* reply);
  // One declaration of a batch: the job (created on first sight), the rank's process noted,
  // the session bound; false when the stream ended (storage unavailable). `again`: a
  // declaration refused for want of room (IsNoRoom), tried again: a refusal is not logged.
  bool OnDeclaration(const v1::RankDeclaration& d, v1::BatchAck* ack,
                     std::vector<v1::ControlRequest>* to_send, bool again = false);
  // Its parts: whether the stream may declare ranks of `job` (--max-jobs-per-stream; idle
  // jobs are forgotten first when it is full); a refused declaration kept for its steps'
  // refusals (at most 4,096 a stream); an accepted one recorded, its early health applied and
  // its session bound (the job's control state, if any, queued in `to_send`).
  bool RoomForJob(const std::string& job);
  void KeepRefusal(const std::pair<std::string, int32_t>& key, Declared refused);
  void Accept(const std::pair<std::string, int32_t>& key, const std::shared_ptr<JobState>& job,
              const v1::RankDeclaration& d, std::vector<v1::ControlRequest>* to_send);
  // The steps of a rank whose declaration was refused for want of room: its declaration is
  // tried again, in at most one batch a second per stream (a job idle since may have left
  // room, and the sidecar declares a rank once). True if it is accepted now.
  bool DeclareAgain(const std::pair<std::string, int32_t>& key, int64_t now_ns,
                    std::vector<v1::ControlRequest>* to_send, bool* ended);
  void Reject(v1::BatchAck* ack, const std::string& job, int32_t rank, const absl::Status& s,
              uint32_t records);
  void OnHealth(const v1::Health& health);
  // Forgets the declarations of jobs idle for limits.job_retire_idle_ms (JobState::IdleFor):
  // a sidecar's stream lives for days and serves job after job, and --max-jobs-per-stream
  // counts the jobs it serves, not every job it ever served. Their JobStates are let go, so
  // that the registry may retire them.
  void ForgetIdleJobs(int64_t now_ns);
  void OnControlAck(const v1::ControlAck& ack);
  // Starts the next queued write if none is in flight.
  void MaybeWrite();
  std::string Who() const;

  const IngestDeps& deps_;
  grpc::CallbackServerContext* const context_;
  const uint64_t id_;
  const int64_t created_ns_;
  std::function<void(uint64_t)> on_done_;

  // Read side: touched by read reactions only (serialized by gRPC).
  grpc::ByteBuffer read_buf_;
  uint64_t messages_read_ = 0;
  std::string node_;
  std::shared_ptr<SidecarSessions::Session> session_;
  std::map<std::pair<std::string, int32_t>, Declared> declared_;
  size_t refusals_kept_ = 0;  // entries of declared_ that hold a refusal (bounded)
  std::set<std::string> declared_jobs_;
  int64_t next_forget_ns_ = 0;  // OnHealth looks for idle jobs at most every 10 s
  int64_t next_again_ns_ = 0;   // DeclareAgain: a batch at most every second
  int64_t again_batch_ = -1;    // the batch (messages_read_) DeclareAgain may try in
  // The newest health of slots whose job the coordinator did not know yet, applied when the
  // rank is declared: the sidecar sends health before the batch that declares new ranks, and
  // that batch may close the job's first window (whose capture decision reads the health).
  // Bounded by kMaxEarlyHealth entries.
  std::map<std::pair<std::string, int32_t>, v1::SlotHealth> early_health_;

  std::atomic<bool> hello_{false};
  // Write side and the end of the stream.
  Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer writing_buf_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_INGEST_STREAM_H_
