#include "daemon/coordinator/coordinator_metrics.h"

#include "daemon/accounting/verdict.h"
#include "daemon/coordinator/detector_health.h"

namespace stagefrontier {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

namespace {

prometheus::Family<prometheus::Counter>& Counters(prometheus::Registry& r, const std::string& name,
                                                  const std::string& help) {
  return BuildCounter().Name(name).Help(help).Register(r);
}

prometheus::Family<prometheus::Gauge>& Gauges(prometheus::Registry& r, const std::string& name,
                                              const std::string& help) {
  return BuildGauge().Name(name).Help(help).Register(r);
}

}  // namespace

CoordinatorMetrics::CoordinatorMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  RegisterJobFamilies();
  RegisterIngestFamilies();
  RegisterProcessCounters();
  RegisterCompactionFamilies();
}

void CoordinatorMetrics::RegisterJobFamilies() {
  auto& r = *registry_;
  rank_steps_ = &Counters(r, "stagefrontier_rank_steps_received_total",
                          "Rank-steps received from sidecars, by outcome");
  steps_ = &Counters(r, "stagefrontier_steps_accounted_total",
                     "Steps closed and accounted, by completeness (complete, partial, rejected; "
                     "captured: left out of the evidence for a profiler capture)");
  exposed_step_ = &Gauges(r, "stagefrontier_exposed_step_seconds",
                          "Exposed step time E = F[S] of the latest accounted step");
  stage_exposed_ = &Counters(r, "stagefrontier_stage_exposed_seconds_total",
                             "Sum of frontier increments per stage: the step time each stage "
                             "exposed to the whole group");
  stage_excess_ = &Counters(r, "stagefrontier_stage_excess_seconds_total",
                            "Excess over baseline attributed to each stage");
  probe_collectives_ = &Counters(r, "stagefrontier_probe_collectives_total",
                                 "Collectives seen by the probe, by the stage they were issued "
                                 "in; bracketing=violation when the stage marks do not contain "
                                 "them (docs/probe.md)");
  top_suspect_rank_ = &Gauges(r, "stagefrontier_top_suspect_rank",
                              "Rank of the latest window's top suspect in each stage, -1 if "
                              "the stage holds none");
  verdicts_ = &Counters(r, "stagefrontier_verdicts_total",
                        "Window verdicts decided, by label and ambiguity reason");
  window_label_ = &Gauges(r, "stagefrontier_window_verdict",
                          "Latest window verdict: 0 HEALTHY, 1 CLEAR, 2 AMBIGUOUS");
  stalled_ = &Gauges(r, "stagefrontier_job_stalled_seconds",
                     "Seconds since the job last advanced while it is stalled (an alarm: hung, "
                     "dead, desync, collective, or a group-wide pause past its limit), else 0");
  detector_condition_ = &Gauges(r, "stagefrontier_detector_condition",
                                "1 while a detector-health condition makes the job's verdicts "
                                "unreliable, by condition (docs/operations.md)");
  ranks_ = &Gauges(r, "stagefrontier_ranks",
                   "Ranks of the job by state (reporting, lagging, missing, finished)");
  stub_records_ = &Counters(r, "stagefrontier_stub_records_lost_total",
                            "Records the stubs lost, by cause (dropped: ring full; torn: "
                            "writer died mid-record; invalid: failed validation)");
  verdict_delay_ = &BuildHistogram()
                        .Name("stagefrontier_step_close_delay_seconds")
                        .Help("From a step's first record arriving to the step being accounted")
                        .Register(r);
}

void CoordinatorMetrics::RegisterIngestFamilies() {
  auto& r = *registry_;
  stream_errors_ = &Counters(r, "stagefrontier_ingest_stream_errors_total",
                             "Ingest streams ended for bad input, by gRPC status code");
  rejections_ = &Counters(r, "stagefrontier_rank_records_rejected_total",
                          "Rank declarations or records refused, by reason");
  using absl::StatusCode;
  for (StatusCode code :
       {StatusCode::kUnauthenticated, StatusCode::kFailedPrecondition, StatusCode::kInvalidArgument,
        StatusCode::kUnavailable, StatusCode::kResourceExhausted, StatusCode::kDeadlineExceeded,
        StatusCode::kInternal}) {
    stream_errors_by_code_[code] = &stream_errors_->Add({{"code", absl::StatusCodeToString(code)}});
  }
  for (StatusCode code :
       {StatusCode::kNotFound, StatusCode::kFailedPrecondition, StatusCode::kOutOfRange,
        StatusCode::kInvalidArgument, StatusCode::kAlreadyExists, StatusCode::kResourceExhausted,
        StatusCode::kInternal}) {
    rejections_by_code_[code] = &rejections_->Add({{"reason", absl::StatusCodeToString(code)}});
  }
  auto& cut = Counters(r, "stagefrontier_ingest_streams_cut_total",
                       "Ingest streams the coordinator refused or cut off to protect the others, "
                       "by reason (too_many_streams, hello_timeout, idle, slow_reader, "
                       "malformed_message)");
  for (const char* reason :
       {"too_many_streams", "hello_timeout", "idle", "slow_reader", "malformed_message"}) {
    streams_cut_[reason] = &cut.Add({{"reason", reason}});
  }
  auto& memory = Gauges(r, "stagefrontier_job_memory_bytes",
                        "Estimated memory of all jobs (reserved) and what may be reserved "
                        "(budget, --max-memory-mb)");
  memory_reserved_ = &memory.Add({{"kind", "reserved"}});
  memory_budget_ = &memory.Add({{"kind", "budget"}});
}

void CoordinatorMetrics::RegisterProcessCounters() {
  auto& r = *registry_;
  sidecar_streams_ =
      &Gauges(r, "stagefrontier_sidecar_streams", "Sidecar ingest streams connected now").Add({});
  ingest_batches_ =
      &Counters(r, "stagefrontier_ingest_batches_total", "Step batches received from sidecars")
           .Add({});
  ingest_health_reports_ = &Counters(r, "stagefrontier_ingest_health_reports_total",
                                     "Slot health reports received from sidecars")
                                .Add({});
  unauthenticated_ = &Counters(r, "stagefrontier_unauthenticated_requests_total",
                               "Requests refused for a missing or wrong token")
                          .Add({});
  journal_truncated_bytes_ = &Counters(r, "stagefrontier_journal_truncated_bytes_total",
                                       "Bytes of damaged journal tails cut off at startup")
                                  .Add({});
  node_identity_conflicts_ =
      &Counters(r, "stagefrontier_node_identity_conflicts_total",
                "Sidecar streams refused for claiming a node name another sidecar holds, or "
                "one their client certificate does not name")
           .Add({});
  journals_set_aside_ = &Counters(r, "stagefrontier_journals_set_aside_total",
                                  "Journals with no intact record moved aside at startup (kept "
                                  "as <job>.journal.unreadable-<time>)")
                             .Add({});
}

void CoordinatorMetrics::RegisterCompactionFamilies() {
  auto& r = *registry_;
  auto& compactions = Counters(r, "stagefrontier_journal_compactions_total",
                               "Compactions of live journals into record blocks, by outcome");
  journal_compactions_done_ = &compactions.Add({{"outcome", "done"}});
  journal_compactions_failed_ = &compactions.Add({{"outcome", "failed"}});
  journal_compacted_bytes_ = &Counters(r, "stagefrontier_journal_compacted_bytes_total",
                                       "Bytes compactions took out of the journals")
                                  .Add({});
}

void CoordinatorMetrics::AddIngestShards(int shards) {
  auto& family = Gauges(*registry_, "stagefrontier_ingest_shard_streams",
                        "Ingest streams open on each gRPC server of --ingest-shards");
  for (int i = 0; i < shards; ++i) {
    ingest_shard_streams_.push_back(&family.Add({{"shard", std::to_string(i)}}));
  }
}

JobMetrics CoordinatorMetrics::ForJob(const std::string& job, const StageSchema& schema) {
  JobMetrics m;
  m.rank_steps_accepted = &rank_steps_->Add({{"training_job", job}, {"outcome", "accepted"}});
  m.rank_steps_duplicate = &rank_steps_->Add({{"training_job", job}, {"outcome", "duplicate"}});
  m.rank_steps_late = &rank_steps_->Add({{"training_job", job}, {"outcome", "late"}});
  m.rank_steps_rejected = &rank_steps_->Add({{"training_job", job}, {"outcome", "rejected"}});
  m.steps_complete = &steps_->Add({{"training_job", job}, {"completeness", "complete"}});
  m.steps_partial = &steps_->Add({{"training_job", job}, {"completeness", "partial"}});
  m.steps_captured = &steps_->Add({{"training_job", job}, {"completeness", "captured"}});
  m.steps_rejected = &steps_->Add({{"training_job", job}, {"completeness", "rejected"}});
  m.exposed_step_seconds = &exposed_step_->Add({{"training_job", job}});
  for (const Stage& s : schema.stages()) {
    m.stage_exposed_seconds.push_back(
        &stage_exposed_->Add({{"training_job", job}, {"stage", s.name}}));
    m.stage_excess_seconds.push_back(
        &stage_excess_->Add({{"training_job", job}, {"stage", s.name}}));
    m.probe_bracketed.push_back(
        &probe_collectives_->Add({{"training_job", job}, {"stage", s.name}, {"bracketing", "ok"}}));
    m.probe_violations.push_back(&probe_collectives_->Add(
        {{"training_job", job}, {"stage", s.name}, {"bracketing", "violation"}}));
    prometheus::Gauge* g = &top_suspect_rank_->Add({{"training_job", job}, {"stage", s.name}});
    g->Set(-1);
    m.top_suspect_rank.push_back(g);
  }
  m.verdicts_healthy =
      &verdicts_->Add({{"training_job", job}, {"label", "HEALTHY"}, {"reason", ""}});
  m.verdicts_clear = &verdicts_->Add({{"training_job", job}, {"label", "CLEAR"}, {"reason", ""}});
  m.verdicts_ambiguous.push_back(nullptr);
  for (int r = 1; r <= 4; ++r) {
    m.verdicts_ambiguous.push_back(
        &verdicts_->Add({{"training_job", job},
                         {"label", "AMBIGUOUS"},
                         {"reason", AmbiguityReasonName(static_cast<AmbiguityReason>(r))}}));
  }
  m.window_label = &window_label_->Add({{"training_job", job}});
  m.stalled_seconds = &stalled_->Add({{"training_job", job}});
  for (const char* c : kDetectorConditions) {
    m.detector_condition.push_back(
        &detector_condition_->Add({{"training_job", job}, {"condition", c}}));
  }
  m.ranks_reporting = &ranks_->Add({{"training_job", job}, {"state", "reporting"}});
  m.ranks_lagging = &ranks_->Add({{"training_job", job}, {"state", "lagging"}});
  m.ranks_missing = &ranks_->Add({{"training_job", job}, {"state", "missing"}});
  m.ranks_finished = &ranks_->Add({{"training_job", job}, {"state", "finished"}});
  m.stub_dropped = &stub_records_->Add({{"training_job", job}, {"cause", "dropped"}});
  m.stub_torn = &stub_records_->Add({{"training_job", job}, {"cause", "torn"}});
  m.stub_invalid = &stub_records_->Add({{"training_job", job}, {"cause", "invalid"}});
  m.verdict_delay_seconds = &verdict_delay_->Add(
      {{"training_job", job}},
      prometheus::Histogram::BucketBoundaries{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                              0.5, 1, 2.5, 5, 10});
  return m;
}

namespace {

template <typename T>
void RemoveSeries(prometheus::Family<T>* family, T* series) {
  if (series != nullptr) family->Remove(series);
}

template <typename T>
void RemoveSeries(prometheus::Family<T>* family, const std::vector<T*>& series) {
  for (T* s : series) RemoveSeries(family, s);
}

}  // namespace

void CoordinatorMetrics::DropJob(const JobMetrics& m) {
  for (prometheus::Counter* c :
       {m.rank_steps_accepted, m.rank_steps_duplicate, m.rank_steps_late, m.rank_steps_rejected}) {
    RemoveSeries(rank_steps_, c);
  }
  for (prometheus::Counter* c :
       {m.steps_complete, m.steps_partial, m.steps_captured, m.steps_rejected}) {
    RemoveSeries(steps_, c);
  }
  RemoveSeries(exposed_step_, m.exposed_step_seconds);
  RemoveSeries(stage_exposed_, m.stage_exposed_seconds);
  RemoveSeries(stage_excess_, m.stage_excess_seconds);
  RemoveSeries(probe_collectives_, m.probe_bracketed);
  RemoveSeries(probe_collectives_, m.probe_violations);
  RemoveSeries(top_suspect_rank_, m.top_suspect_rank);
  RemoveSeries(verdicts_, m.verdicts_healthy);
  RemoveSeries(verdicts_, m.verdicts_clear);
  RemoveSeries(verdicts_, m.verdicts_ambiguous);  // [0] is null
  RemoveSeries(window_label_, m.window_label);
  RemoveSeries(stalled_, m.stalled_seconds);
  RemoveSeries(detector_condition_, m.detector_condition);
  for (prometheus::Gauge* g :
       {m.ranks_reporting, m.ranks_lagging, m.ranks_missing, m.ranks_finished}) {
    RemoveSeries(ranks_, g);
  }
  for (prometheus::Counter* c : {m.stub_dropped, m.stub_torn, m.stub_invalid}) {
    RemoveSeries(stub_records_, c);
  }
  RemoveSeries(verdict_delay_, m.verdict_delay_seconds);
}

namespace {

prometheus::Counter& KnownOrInternal(
    const std::map<absl::StatusCode, prometheus::Counter*>& by_code, absl::StatusCode code) {
  auto it = by_code.find(code);
  return *(it != by_code.end() ? it->second : by_code.at(absl::StatusCode::kInternal));
}

}  // namespace

prometheus::Counter& CoordinatorMetrics::stream_errors(absl::StatusCode code) {
  return KnownOrInternal(stream_errors_by_code_, code);
}

prometheus::Counter& CoordinatorMetrics::rejections(absl::StatusCode code) {
  return KnownOrInternal(rejections_by_code_, code);
}

prometheus::Counter& CoordinatorMetrics::streams_cut(const std::string& reason) {
  return *streams_cut_.at(reason);
}

}  // namespace stagefrontier
