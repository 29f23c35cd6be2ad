// What one client, one stream or one job may make the coordinator hold, and the memory model
// behind the job limits (docs/operations.md, "Resource model"). Every limit has a flag and a
// clear refusal; none is checked by timing.
//
//   ResourceLimits limits;                       // defaults, or from flags
//   int64_t bytes = EstimateJobBytes(shape);     // what a job of that shape may hold
//   MemoryBudget budget(limits.max_memory_bytes);
//   absl::StatusOr<MemoryBudget::Reservation> r = budget.Reserve("job run42", bytes);
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_RESOURCE_LIMITS_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_RESOURCE_LIMITS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"

namespace stagefrontier {

struct ResourceLimits {
  // Largest world size a job may declare (--max-world-size). 100,000 GPUs fit.
  int32_t max_world_size = 131'072;
  // Largest estimated memory of one job (--max-job-memory-mb).
  int64_t max_job_memory_bytes = int64_t{8} << 30;
  // All jobs together (--max-memory-mb); 0: three quarters of the machine's memory.
  int64_t max_memory_bytes = 0;
  // Jobs on this coordinator (--max-jobs), and jobs one ingest stream may declare
  // (--max-jobs-per-stream).
  int32_t max_jobs = 1024;
  int32_t max_jobs_per_stream = 64;
  // A job none of whose ranks showed life for this long (no records, no live owner in any
  // slot's health) no longer counts against either: a stream forgets it, and the coordinator
  // retires it from memory when it needs room for a new job (its journal stays; the job comes
  // back from it if its ranks do) (--job-retire-idle-ms). Jobs are retired least recently
  // active first, never one an open stream or a query still uses.
  int64_t job_retire_idle_ms = 600'000;
  // Concurrent ingest streams (--max-streams).
  int32_t max_streams = 16'384;
  // A stream must send its Hello this soon after opening (--hello-timeout-ms).
  int64_t hello_timeout_ms = 10'000;
  // A stream that delivered nothing for this long is ended, and a connection that held no call
  // for this long is closed (--idle-timeout-ms; 0: never): a sidecar sends at least every 4.5 s,
  // and the connection of a machine that vanished stays half-open (the coordinator has no
  // HTTP/2 keepalive: coordinator_server.cc).
  int64_t idle_timeout_ms = 60'000;
  // Messages (acks, control) queued for one stream that does not read them; beyond this the
  // stream is cut off (--max-stream-queue).
  int32_t max_stream_queue = 1024;
};

// The shape of a job, for the memory model.
struct JobShape {
  int64_t world_size = 0;
  int64_t stages = 0;
  int64_t window_steps = 100;
  int64_t pending_steps = 1024;            // steps the aligner may hold open
  int64_t history_steps = 10'000;          // step summaries kept for queries
  int64_t history_rank_steps = 1'000'000;  // raw rank-steps kept for re-accounting
};

// Upper estimate, in bytes, of what a job of `shape` holds once its windows and histories are
// full: the engine's window (durations, probe waits, presence per rank and step), the
// aligner's open steps, the raw rank-steps and step summaries kept for queries, and per-rank
// health. memory_model_test checks it against the heap a real job grows.
int64_t EstimateJobBytes(const JobShape& shape);

// A refusal for want of room that a job leaving memory may make (the memory budget,
// --max-jobs, --max-jobs-per-stream), unlike a limit on the job itself: ResourceExhausted with
// `message`, and IsNoRoom(status) tells it. The registry retires an idle job on it, and a
// stream tries such a refused declaration again (ingest_stream.h).
// `needed_bytes` (the memory budget's refusals): what the job needs, 0 for a count.
absl::Status NoRoom(std::string_view message, int64_t needed_bytes = 0);
bool IsNoRoom(const absl::Status& status);
// The memory a NoRoom refusal of the budget needed; 0 for other refusals.
int64_t NoRoomBytes(const absl::Status& status);

// The coordinator's memory for jobs: reservations against a total. Thread-safe.
class MemoryBudget {
 public:
  // total_bytes <= 0: three quarters of the machine's physical memory.
  explicit MemoryBudget(int64_t total_bytes);

  // A share of the budget, given back when destroyed.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    ~Reservation();
    int64_t bytes() const { return bytes_; }
    // Changes the reserved amount. ResourceExhausted (nothing changes) if growing does not fit.
    [[nodiscard]] absl::Status Resize(int64_t bytes, const std::string& what);

   private:
    friend class MemoryBudget;
    MemoryBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
  };

  // Reserves `bytes` for `what` ("job run42"). ResourceExhausted naming what, how much it
  // needs and how much is left: a NoRoom status.
  [[nodiscard]] absl::StatusOr<Reservation> Reserve(const std::string& what, int64_t bytes);
  // Reserves even past the total (a job restored from its journal is never refused), and
  // says so in *over.
  Reservation ReserveAnyway(int64_t bytes, bool* over);

  int64_t total() const { return total_; }
  int64_t used() const;

 private:
  absl::Status Take(const std::string& what, int64_t bytes, bool force);
  void Give(int64_t bytes);

  const int64_t total_;
  mutable Mutex mu_;
  int64_t used_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_RESOURCE_LIMITS_H_
