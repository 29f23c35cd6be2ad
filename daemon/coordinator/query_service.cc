#include "daemon/coordinator/query_service.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/accounting/robust_stats.h"
#include "daemon/captures/capture_file_name.h"
#include "daemon/captures/capture_file_stream.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/grpc_status.h"
#include "daemon/common/log_safe.h"
#include "daemon/coordinator/rank_steps_query.h"
#include "daemon/nodes/nodes_reply.h"
#include "shm/control_channel.h"
#include "shm/monotonic_clock.h"
#include "shm/record_limits.h"

namespace stagefrontier {
namespace {

// The job id a job name's captures are kept under ("run42@2" -> "run42"); "" if malformed.
std::string CaptureJobId(const std::string& name) {
  std::string id;
  uint32_t generation = 0;
  if (!ParseJobName(name, &id, &generation) || !shm::ValidJobId(id)) return "";
  return id;
}

// A control request for one rank that reached no sidecar.
grpc::Status NoSidecar(const JobState& job, int32_t rank) {
  return grpc::Status(grpc::UNAVAILABLE, absl::StrCat("no sidecar serves rank ", rank, " of job ",
                                                      job.name(), " right now"));
}

}  // namespace

QueryService::QueryService(JobRegistry* jobs, SidecarSessions* sessions,
                           CoordinatorMetrics* metrics, std::string token, SelfTestBook* self_tests,
                           const NodeLedger* nodes, FleetBaseline* fleet)
    : jobs_(jobs),
      sessions_(sessions),
      metrics_(metrics),
      tokens_(AccessTokens::SharedOnly(std::move(token))),
      self_tests_(self_tests),
      nodes_(nodes),
      fleet_(fleet),
      watchers_(jobs->verdict_bell()) {}

void QueryService::Shutdown() { watchers_.Shutdown(); }

grpc::Status QueryService::Authorize(const grpc::ServerContextBase& context, Access need,
                                     const std::string& job) {
  grpc::Status s = tokens_.Check(context, need, job);
  if (s.error_code() == grpc::UNAUTHENTICATED) metrics_->unauthenticated().Increment();
  return s;
}

grpc::Status QueryService::Lookup(const grpc::ServerContextBase& context, const std::string& job,
                                  std::shared_ptr<JobState>* out, Access need) {
  if (job.empty()) {
    if (grpc::Status s = Authorize(context); !s.ok()) return s;
    return grpc::Status(grpc::INVALID_ARGUMENT, "no job named (--job)");
  }
  std::string id;
  uint32_t generation = 0;
  if (!ParseJobName(job, &id, &generation)) {
    if (grpc::Status s = Authorize(context); !s.ok()) return s;
    return grpc::Status(grpc::INVALID_ARGUMENT,
                        absl::StrCat("job name \"", LogSafe(job),
                                     "\": after '@' comes a run's generation (run42@2)"));
  }
  // Tokens are per job id: every run of a job is the same job's.
  if (grpc::Status s = Authorize(context, need, id); !s.ok()) return s;
  *out = jobs_->Find(job);
  if (!*out) {
    if (const std::string journal = jobs_->RetiredJournal(id); !journal.empty()) {
      return grpc::Status(
          grpc::NOT_FOUND,
          absl::StrCat("job \"", LogSafe(job), "\" ended and left this coordinator's memory ",
                       "(--job-retire-idle-ms); its journal is ", journal,
                       " (stagefrontier journal), and it comes back if its ranks declare again"));
    }
    return grpc::Status(grpc::NOT_FOUND, absl::StrCat("unknown job \"", LogSafe(job), "\""));
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest*,
                                    v1::ListJobsReply* reply) {
  // (PERMISSION_DENIED on no one job: a job's token, which lists its own job only.)
  if (grpc::Status s = Authorize(*context); !s.ok() && s.error_code() != grpc::PERMISSION_DENIED) {
    return s;
  }
  for (const auto& job : jobs_->All()) {
    if (tokens_.MaySee(*context, job->id())) job->Info(reply->add_jobs());
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::GetSuspects(grpc::ServerContext* context,
                                       const v1::GetSuspectsRequest* request,
                                       v1::SuspectsReply* reply) {
  std::shared_ptr<JobState> job;
  if (grpc::Status s = Lookup(*context, request->job(), &job); !s.ok()) return s;
  if (request->window() < 0) {
    return grpc::Status(grpc::INVALID_ARGUMENT, "window must be 0 (current) or a step count");
  }
  return ToGrpcStatus(job->Suspects(request->window(), reply));
}

grpc::Status QueryService::GetSteps(grpc::ServerContext* context,
                                    const v1::GetStepsRequest* request, v1::GetStepsReply* reply) {
  std::shared_ptr<JobState> job;
  if (grpc::Status s = Lookup(*context, request->job(), &job); !s.ok()) return s;
  if (request->to_step() < request->from_step() || request->limit() < 0) {
    return grpc::Status(grpc::INVALID_ARGUMENT,
                        absl::StrCat("bad step range [", request->from_step(), ", ",
                                     request->to_step(), "] or limit ", request->limit()));
  }
  job->Steps(request->from_step(), request->to_step(), request->limit(), reply);
  return grpc::Status::OK;
}

grpc::Status QueryService::GetRankSteps(grpc::ServerContext* context,
                                        const v1::GetRankStepsRequest* request,
                                        v1::GetRankStepsReply* reply) {
  std::shared_ptr<JobState> job;
  if (grpc::Status s = Lookup(*context, request->job(), &job); !s.ok()) return s;
  return ToGrpcStatus(FillRankSteps(*job, *request, reply));
}

grpc::ServerWriteReactor<v1::VerdictEvent>* QueryService::WatchVerdicts(
    grpc::CallbackServerContext* context, const v1::WatchVerdictsRequest* request) {
  std::shared_ptr<JobState> job;
  if (grpc::Status s = Lookup(*context, request->job(), &job); !s.ok()) {
    return VerdictWatchers::Refuse(std::move(s));
  }
  return watchers_.Watch(std::move(job), request->after_seq(), request->held_only());
}

grpc::Status QueryService::GetHealth(grpc::ServerContext* context,
                                     const v1::GetHealthRequest* request,
                                     v1::GetHealthReply* reply) {
  std::shared_ptr<JobState> job;
  if (grpc::Status s = Lookup(*context, request->job(), &job); !s.ok()) return s;
  job->Health(reply);
  if (self_tests_ != nullptr) {
    const SelfTestLoad load =
        self_tests_->Load(job->id(), job->NewestStep(), shm::MonotonicNowNs());
    v1::SelfTestLoad* l = reply->mutable_selftests();
    l->set_running(load.running);
    l->set_running_all(load.running_all);
    l->set_steps_last_hour(load.steps_last_hour);
    l->set_max_running_per_job(load.limits.max_running_per_job);
    l->set_max_running(load.limits.max_running);
    l->set_max_steps_per_hour(load.limits.max_steps_per_hour);
  }
  return grpc::Status::OK;
}

void QueryService::ExpireSelfTests() {
  if (self_tests_ == nullptr) return;
  const std::vector<v1::ControlRequest> stops =
      self_tests_->ExpireLeases(shm::MonotonicNowNs(), [this](const std::string& name) {
        const std::shared_ptr<JobState> job = jobs_->Find(name);
        return job != nullptr ? job->NewestStep() : int64_t{-1};
      });
  for (const v1::ControlRequest& stop : stops) sessions_->Send(stop);
}

grpc::Status QueryService::Control(grpc::ServerContext* context, const v1::ControlCommand* request,
                                   v1::ControlReply* reply) {
  std::shared_ptr<JobState> job;
  if (grpc::Status s = Lookup(*context, request->job(), &job, Access::kControl); !s.ok()) {
    return s;
  }
  if (job->superseded()) {
    // Its processes are gone; a request would reach the current run's instead.
    return grpc::Status(
        grpc::FAILED_PRECONDITION,
        absl::StrCat("job ", job->name(), " is an earlier run of ", job->id(),
                     ", kept for reading: control the current run as --job ", job->id()));
  }
  const uint64_t id = next_request_id_++;
  reply->set_request_id(id);
  switch (request->action_case()) {
    case v1::ControlCommand::kPause:
    case v1::ControlCommand::kResume:
      return SetRecording(job.get(), request->action_case() == v1::ControlCommand::kPause, id,
                          reply);
    case v1::ControlCommand::kSampleEvery:
      return SetSampling(job.get(), request->sample_every(), id, reply);
    case v1::ControlCommand::kConfig:
      return ChangeConfig(job.get(), request->config(), reply);
    case v1::ControlCommand::kTrace:
      return AskTrace(*job, request->trace(), id, reply);
    case v1::ControlCommand::kSelftest:
      return StartSelfTest(*job, request->selftest(), id, reply);
    case v1::ControlCommand::kCapture:
      return AskCapture(*job, request->capture(), reply);
    default:
      return grpc::Status(grpc::INVALID_ARGUMENT, "no control action given");
  }
}

grpc::Status QueryService::SetRecording(JobState* job, bool pause, uint64_t id,
                                        v1::ControlReply* reply) {
  job->SetPaused(pause);
  if (absl::Status s = job->Flush(); !s.ok()) return ToGrpcStatus(s);
  v1::ControlRequest c = job->JobControl();
  c.set_request_id(id);
  const int reached = sessions_->Send(c);
  reply->set_message(absl::StrCat(pause ? "paused" : "resumed", " recording on job ", job->name(),
                                  "; told ", reached, " sidecar(s)"));
  return grpc::Status::OK;
}

grpc::Status QueryService::SetSampling(JobState* job, uint32_t every, uint64_t id,
                                       v1::ControlReply* reply) {
  job->SetSampleEvery(every);
  v1::ControlRequest c = job->JobControl();
  c.set_request_id(id);
  const int reached = sessions_->Send(c);
  reply->set_message(absl::StrCat("stubs of job ", job->name(), " record one step in ",
                                  std::max<uint32_t>(1, every), "; told ", reached, " sidecar(s)"));
  return grpc::Status::OK;
}

grpc::Status QueryService::ChangeConfig(JobState* job, const v1::ConfigChange& c,
                                        v1::ControlReply* reply) {
  if (absl::Status s = job->ApplyConfig(c); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = job->Flush(); !s.ok()) return ToGrpcStatus(s);
  reply->set_message(StallLimitOnly(c)
                         ? absl::StrCat("job ", job->name(), ": stall limit ",
                                        c.stall_after_ms() > 0
                                            ? absl::StrCat(c.stall_after_ms(), " ms")
                                            : "back to the default")
                         : absl::StrCat("job ", job->name(),
                                        ": new thresholds apply from the next step (the engine "
                                        "restarts its window and warm-up)"));
  return grpc::Status::OK;
}

grpc::Status QueryService::AskTrace(const JobState& job, const v1::TraceRequest& t, uint64_t id,
                                    v1::ControlReply* reply) {
  if (t.rank() < 0 || t.rank() >= job.world_size()) {
    return grpc::Status(
        grpc::INVALID_ARGUMENT,
        absl::StrCat("rank ", t.rank(), " is outside world size ", job.world_size()));
  }
  if (t.last_step() < t.first_step() || t.first_step() < 0 ||
      t.last_step() - t.first_step() >= 10'000) {
    return grpc::Status(grpc::INVALID_ARGUMENT,
                        absl::StrCat("trace steps [", t.first_step(), ", ", t.last_step(),
                                     "] must be a range of at most 10000 steps"));
  }
  v1::ControlRequest c = job.JobControl();
  c.set_request_id(id);
  c.set_rank(t.rank());
  c.set_trace_first_step(t.first_step());
  c.set_trace_last_step(t.last_step());
  c.set_sets(shm::kControlSetsTrace);
  if (sessions_->Send(c) == 0) return NoSidecar(job, t.rank());
  reply->set_message(absl::StrCat("asked rank ", t.rank(), " for a detailed trace of steps ",
                                  t.first_step(), "..", t.last_step()));
  return grpc::Status::OK;
}

grpc::Status QueryService::AskCapture(const JobState& job, const v1::CaptureCommand& c,
                                      v1::ControlReply* reply) {
  if (captures_ == nullptr) {
    return grpc::Status(grpc::UNIMPLEMENTED, "this coordinator has no capture policy");
  }
  const std::vector<int32_t> ranks(c.ranks().begin(), c.ranks().end());
  const int32_t steps = c.steps() == 0 ? captures_->default_steps()
                                       : static_cast<int32_t>(std::min<uint32_t>(c.steps(), 1000));
  absl::StatusOr<CaptureDecision> d =
      captures_->Manual(job.id(), ranks, steps, job.world_size(), job.NewestStep(),
                        job.JobControl(), shm::MonotonicNowNs());
  if (!d.ok()) return ToGrpcStatus(d.status());
  reply->set_request_id(d->id);
  std::vector<int32_t> asked = d->ranks();
  std::sort(asked.begin(), asked.end());
  reply->set_message(absl::StrCat(
      "capture ", d->id, " of job ", job.name(), ": ranks ", absl::StrJoin(asked, ", "), ", steps ",
      d->first_step, "..", d->first_step + d->steps - 1,
      d->stage.empty() ? ""
                       : absl::StrCat("; report: rank ", d->suspects[0], "'s ", d->stage,
                                      " against the others")));
  return grpc::Status::OK;
}

grpc::Status QueryService::StartSelfTest(const JobState& job, const v1::SelfTestCommand& command,
                                         uint64_t id, v1::ControlReply* reply) {
  if (self_tests_ == nullptr) {
    return grpc::Status(grpc::UNIMPLEMENTED, "this coordinator does not run self-tests");
  }
  if (command.cancel_id() != 0) {
    absl::StatusOr<v1::ControlRequest> stop = self_tests_->Cancel(
        job.id(), command.cancel_id(), job.NewestStep(), "cancelled by sfctl selftest --cancel");
    if (!stop.ok()) return ToGrpcStatus(stop.status());
    const int reached = sessions_->Send(*stop);
    reply->set_request_id(command.cancel_id());
    reply->set_message(absl::StrCat("self-test ", command.cancel_id(), " of job ", job.name(),
                                    " cancelled; told ", reached, " sidecar(s)"));
    return grpc::Status::OK;
  }
  SelfTestJobFacts facts;
  facts.job = job.id();
  facts.world_size = job.world_size();
  for (const Stage& s : job.schema().stages()) facts.stages.push_back(s.name);
  facts.newest_step = job.NewestStep();
  v1::GetStepsReply recent;
  job.Steps(facts.newest_step - 50, facts.newest_step, 50, &recent);
  std::vector<int64_t> exposed;
  for (const v1::StepSummary& s : recent.steps()) exposed.push_back(s.exposed_ns());
  facts.step_ns = MedianInPlace(exposed);
  absl::StatusOr<v1::ControlRequest> req =
      self_tests_->Start(facts, command, id, shm::MonotonicNowNs());
  if (!req.ok()) return ToGrpcStatus(req.status());
  // The request carries the job-wide state too (paused, sampling): the sidecar applies it all.
  v1::ControlRequest c = *req;
  const v1::ControlRequest job_wide = job.JobControl();
  c.set_paused(job_wide.paused());
  c.set_sample_every(job_wide.sample_every());
  if (sessions_->Send(c) == 0) {
    self_tests_->Forget(job.id(), id);
    return NoSidecar(job, command.rank());
  }
  reply->set_message(absl::StrCat("self-test ", id, ": asked rank ", command.rank(), " to add ",
                                  command.delay_ms(), " ms to stage ", command.stage(),
                                  " in steps ", req->selftest_first_step(), "..",
                                  req->selftest_last_step()));
  return grpc::Status::OK;
}

grpc::Status QueryService::GetSelfTests(grpc::ServerContext* context,
                                        const v1::GetSelfTestsRequest* request,
                                        v1::GetSelfTestsReply* reply) {
  std::shared_ptr<JobState> job;
  if (grpc::Status s = Lookup(*context, request->job(), &job); !s.ok()) return s;
  if (self_tests_ == nullptr) {
    return grpc::Status(grpc::UNIMPLEMENTED, "this coordinator does not run self-tests");
  }
  // Asking for one self-test's result keeps it alive (ExpireSelfTests).
  if (request->id() != 0) self_tests_->Renew(job->id(), request->id(), shm::MonotonicNowNs());
  const std::vector<v1::VerdictEvent> verdicts = job->VerdictsAfter(0);
  return ToGrpcStatus(
      self_tests_->Report(job->id(), request->id(), verdicts, shm::MonotonicNowNs(), reply));
}

grpc::Status QueryService::ListCaptures(grpc::ServerContext* context,
                                        const v1::ListCapturesRequest* request,
                                        v1::ListCapturesReply* reply) {
  std::shared_ptr<JobState> job;
  if (grpc::Status s = Lookup(*context, request->job(), &job); !s.ok()) return s;
  if (captures_ == nullptr) {
    return grpc::Status(grpc::UNIMPLEMENTED, "this coordinator has no capture policy");
  }
  reply->set_job(job->name());
  reply->set_automatic(captures_automatic_);
  // Captures belong to the job id (the stubs know no generation), every run's together.
  for (const CaptureDecision& d : captures_->Decisions(job->id())) {
    v1::CaptureDecisionInfo* o = reply->add_decisions();
    o->set_id(d.id);
    o->set_asked(d.asked);
    o->set_manual(d.manual);
    o->set_reason(d.reason);
    for (int32_t r : d.suspects) o->add_suspects(r);
    for (int32_t r : d.references) o->add_references(r);
    o->set_first_step(d.first_step);
    o->set_steps(d.steps);
    o->set_verdict_last_step(d.verdict_last_step);
    o->set_stage(d.stage);
    o->set_missed(d.missed);
    o->set_kind(d.kind == CaptureKind::kStacks ? "stacks" : "trace");
    if (!d.asked) continue;
    for (const RankCaptureAnswer& a : captures_->Answers(job->id(), d)) {
      v1::RankCaptureAnswer* out = o->add_answers();
      out->set_rank(a.rank);
      if (a.state != 0) out->set_state(shm::CaptureStateName(a.state));
      if (a.state == shm::v1::kCaptureFailed) out->set_failure(shm::CaptureFailureName(a.failure));
      out->set_bytes(a.bytes);
      out->set_error(a.error);
    }
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::GetCaptureReport(grpc::ServerContext* context,
                                            const v1::GetCaptureReportRequest* request,
                                            v1::GetCaptureReportReply* reply) {
  const std::string job = CaptureJobId(request->job());
  if (grpc::Status s = Authorize(*context, Access::kRead, job); !s.ok()) return s;
  if (capture_reports_ == nullptr) {
    return grpc::Status(grpc::UNIMPLEMENTED, "this coordinator keeps no captures");
  }
  if (job.empty()) return grpc::Status(grpc::INVALID_ARGUMENT, "not a job id (--job)");
  absl::StatusOr<CaptureReportView> v = capture_reports_->Get(job, request->capture());
  if (!v.ok()) return ToGrpcStatus(v.status());
  reply->set_job(request->job());
  reply->set_capture(request->capture());
  reply->set_state(CaptureReportStateName(v->state));
  reply->set_detail(v->detail);
  for (const StoredCapture& f : v->files) {
    v1::StoredCaptureFile* o = reply->add_files();
    o->set_rank(f.rank);
    o->set_file_name(f.file_name);
    o->set_bytes(f.bytes);
  }
  reply->set_text(v->text);
  reply->set_report_json(v->json);
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<v1::CaptureFileChunk>* QueryService::FetchCapture(
    grpc::CallbackServerContext* context, const v1::FetchCaptureRequest* request) {
  const std::string job = CaptureJobId(request->job());
  if (grpc::Status s = Authorize(*context, Access::kRead, job); !s.ok()) {
    return CaptureFileStream::Refuse(s);
  }
  if (capture_store_ == nullptr) {
    return CaptureFileStream::Refuse(
        grpc::Status(grpc::UNIMPLEMENTED, "this coordinator keeps no captures"));
  }
  if (job.empty() || !ParseCaptureFileName(request->file_name())) {
    return CaptureFileStream::Refuse(
        grpc::Status(grpc::INVALID_ARGUMENT,
                     "want a job id and a capture file name (trace_rank<R>_step<F>.json)"));
  }
  return CaptureFileStream::Start(
      absl::StrCat(capture_store_->options().root, "/", job, "/", request->file_name()),
      absl::StrCat("no capture file ", request->file_name(), " of job ", job));
}

grpc::Status QueryService::ListNodes(grpc::ServerContext* context,
                                     const v1::ListNodesRequest* request,
                                     v1::ListNodesReply* reply) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (nodes_ == nullptr) {
    return grpc::Status(grpc::UNIMPLEMENTED, "this coordinator keeps no node ledger");
  }
  return ToGrpcStatus(FillListNodes(*nodes_, *request, reply));
}

grpc::Status QueryService::ReportSweep(grpc::ServerContext* context, const v1::SweepReport* request,
                                       v1::SweepJudgement* reply) {
  // A node's sweep figures move the fleet's baseline: not for read tokens.
  if (grpc::Status s = Authorize(*context, Access::kControl); !s.ok()) return s;
  if (fleet_ == nullptr) {
    return grpc::Status(grpc::UNIMPLEMENTED, "this coordinator keeps no fleet baseline");
  }
  absl::StatusOr<v1::SweepJudgement> j = fleet_->Judge(*request, shm::RealtimeNowNs());
  if (!j.ok()) return ToGrpcStatus(j.status());
  if (absl::Status s = fleet_->Flush(); !s.ok()) return ToGrpcStatus(s);
  *reply = std::move(*j);
  return grpc::Status::OK;
}

}  // namespace stagefrontier
