// The coordinator's Prometheus metrics (prometheus-cpp), named after the Prometheus
// conventions: `stagefrontier_` prefix, base units (seconds), `_total` counters,
// `training_job` (not `job`, which Prometheus sets to the scrape job) and
// `stage` as labels, never a step or other unbounded label. docs/operations.md lists them.
//
//   CoordinatorMetrics metrics;
//   prometheus::Exposer exposer("127.0.0.1:7312");
//   exposer.RegisterCollectable(metrics.registry());
//   JobMetrics jm = metrics.ForJob("run42", schema);
//   jm.rank_steps_accepted->Increment(16);
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_COORDINATOR_METRICS_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_COORDINATOR_METRICS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

// Handles for one job's series (owned by the registry; valid while it lives).
struct JobMetrics {
  prometheus::Counter* rank_steps_accepted = nullptr;
  prometheus::Counter* rank_steps_duplicate = nullptr;
  prometheus::Counter* rank_steps_late = nullptr;
  prometheus::Counter* rank_steps_rejected = nullptr;
  prometheus::Counter* steps_complete = nullptr;
  prometheus::Counter* steps_partial = nullptr;
  prometheus::Counter* steps_captured = nullptr;
  prometheus::Counter* steps_rejected = nullptr;
  prometheus::Gauge* exposed_step_seconds = nullptr;
  std::vector<prometheus::Counter*> stage_exposed_seconds;  // by stage
  std::vector<prometheus::Counter*> stage_excess_seconds;   // by stage
  std::vector<prometheus::Gauge*> top_suspect_rank;         // by stage, -1 when none
  prometheus::Counter* verdicts_healthy = nullptr;
  prometheus::Counter* verdicts_clear = nullptr;
  std::vector<prometheus::Counter*> verdicts_ambiguous;  // by AmbiguityReason (1..4)
  prometheus::Gauge* window_label = nullptr;             // 0 healthy, 1 clear, 2 ambiguous
  prometheus::Gauge* stalled_seconds = nullptr;          // while a stall alarms, else 0
  prometheus::Gauge* ranks_reporting = nullptr;
  prometheus::Gauge* ranks_lagging = nullptr;
  prometheus::Gauge* ranks_missing = nullptr;
  prometheus::Gauge* ranks_finished = nullptr;  // released their slot cleanly after reporting
  prometheus::Counter* stub_dropped = nullptr;
  prometheus::Counter* stub_torn = nullptr;
  prometheus::Counter* stub_invalid = nullptr;
  prometheus::Histogram* verdict_delay_seconds = nullptr;
  // Collectives the probe saw, by stage where issued: inside an allowed stage, or not.
  std::vector<prometheus::Counter*> probe_bracketed;   // by stage
  std::vector<prometheus::Counter*> probe_violations;  // by stage
  // 1 while a detector-health condition holds, by kDetectorConditions index.
  std::vector<prometheus::Gauge*> detector_condition;
};

class CoordinatorMetrics {
 public:
  CoordinatorMetrics();

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  // Creates (or finds) the series of job `job`.
  JobMetrics ForJob(const std::string& job, const StageSchema& schema);
  // Removes a job's series from /metrics (the job left memory): a coordinator that serves
  // job after job must not export every job it ever saw. `m`'s handles dangle afterwards.
  void DropJob(const JobMetrics& m);

  prometheus::Gauge& sidecar_streams() { return *sidecar_streams_; }
  prometheus::Counter& ingest_batches() { return *ingest_batches_; }
  prometheus::Counter& ingest_health_reports() { return *ingest_health_reports_; }
  // Streams ended by the coordinator for bad input, by status code: UNAUTHENTICATED,
  // FAILED_PRECONDITION, INVALID_ARGUMENT, UNAVAILABLE; any other code counts as INTERNAL.
  prometheus::Counter& stream_errors(absl::StatusCode code);
  // Per-rank records refused, by status code: NOT_FOUND (unknown job), FAILED_PRECONDITION
  // (schema mismatch), OUT_OF_RANGE (rank), INVALID_ARGUMENT, ALREADY_EXISTS; others INTERNAL.
  prometheus::Counter& rejections(absl::StatusCode code);
  prometheus::Counter& unauthenticated() { return *unauthenticated_; }
  // Streams refused or cut off: "too_many_streams", "hello_timeout", "slow_reader",
  // "malformed_message".
  prometheus::Counter& streams_cut(const std::string& reason);
  prometheus::Gauge& memory_reserved() { return *memory_reserved_; }
  prometheus::Gauge& memory_budget() { return *memory_budget_; }
  prometheus::Counter& journal_truncated_bytes() { return *journal_truncated_bytes_; }
  prometheus::Counter& journals_set_aside() { return *journals_set_aside_; }
  prometheus::Counter& node_identity_conflicts() { return *node_identity_conflicts_; }
  // Compactions of live journals (--journal-compact-mb): outcome "done" or "failed", and the
  // bytes they took out of the files.
  prometheus::Counter& journal_compactions(bool done) {
    return done ? *journal_compactions_done_ : *journal_compactions_failed_;
  }
  prometheus::Counter& journal_compacted_bytes() { return *journal_compacted_bytes_; }
  // Ingest streams open on each gRPC server of --ingest-shards, by `shard` (0..shards-1):
  // created by AddIngestShards (only with several shards).
  void AddIngestShards(int shards);
  prometheus::Gauge& ingest_shard_streams(int shard) { return *ingest_shard_streams_[shard]; }
  int ingest_shards() const { return static_cast<int>(ingest_shard_streams_.size()); }

 private:
  // The constructor's parts, in registration order (the order of /metrics).
  void RegisterJobFamilies();      // per-job families; ForJob adds their series
  void RegisterIngestFamilies();   // stream errors, refusals, cut streams, memory
  void RegisterProcessCounters();  // one series each
  void RegisterCompactionFamilies();

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* rank_steps_;
  prometheus::Family<prometheus::Counter>* steps_;
  prometheus::Family<prometheus::Gauge>* exposed_step_;
  prometheus::Family<prometheus::Counter>* stage_exposed_;
  prometheus::Family<prometheus::Counter>* stage_excess_;
  prometheus::Family<prometheus::Gauge>* top_suspect_rank_;
  prometheus::Family<prometheus::Counter>* verdicts_;
  prometheus::Family<prometheus::Gauge>* window_label_;
  prometheus::Family<prometheus::Gauge>* stalled_;
  prometheus::Family<prometheus::Gauge>* detector_condition_;
  prometheus::Family<prometheus::Gauge>* ranks_;
  prometheus::Family<prometheus::Counter>* stub_records_;
  prometheus::Family<prometheus::Histogram>* verdict_delay_;
  prometheus::Family<prometheus::Counter>* probe_collectives_;
  prometheus::Family<prometheus::Counter>* stream_errors_;
  prometheus::Family<prometheus::Counter>* rejections_;
  // The series of the known codes, created at start at 0 so that rate() and alerts see them.
  std::map<absl::StatusCode, prometheus::Counter*> stream_errors_by_code_;
  std::map<absl::StatusCode, prometheus::Counter*> rejections_by_code_;
  std::map<std::string, prometheus::Counter*> streams_cut_;
  prometheus::Gauge* memory_reserved_;
  prometheus::Gauge* memory_budget_;
  prometheus::Gauge* sidecar_streams_;
  prometheus::Counter* ingest_batches_;
  prometheus::Counter* ingest_health_reports_;
  prometheus::Counter* unauthenticated_;
  prometheus::Counter* journal_truncated_bytes_;
  prometheus::Counter* journals_set_aside_;
  prometheus::Counter* node_identity_conflicts_;
  prometheus::Counter* journal_compactions_done_;
  prometheus::Counter* journal_compactions_failed_;
  prometheus::Counter* journal_compacted_bytes_;
  std::vector<prometheus::Gauge*> ingest_shard_streams_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_COORDINATOR_METRICS_H_
