#include "daemon/coordinator/query_service.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/accounting/robust_stats.h"
#include "daemon/common/grpc_security.h"
#include "daemon/nodes/nodes_reply.h"
#include "shm/monotonic_clock.h"

namespace stagefrontier {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
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
      token_(std::move(token)),
      self_tests_(self_tests),
      nodes_(nodes),
      fleet_(fleet) {}

void QueryService::Shutdown() {
  shutting_down_ = true;
  for (const auto& job : jobs_->All()) job->WakeWatchers();
}

grpc::Status QueryService::Authorize(const grpc::ServerContext& context) {
  if (TokenMatches(context, token_)) return grpc::Status::OK;
  metrics_->unauthenticated().Increment();
  return grpc::Status(grpc::UNAUTHENTICATED, "missing or wrong token (authorization: Bearer ...)");
}

grpc::Status QueryService::Lookup(const grpc::ServerContext& context, const std::string& job,
                                  std::shared_ptr<JobState>* out) {
  if (grpc::Status s = Authorize(context); !s.ok()) return s;
  if (job.empty()) return grpc::Status(grpc::INVALID_ARGUMENT, "no job named (--job)");
  *out = jobs_->Find(job);
  if (!*out) {
    return grpc::Status(grpc::NOT_FOUND, absl::StrCat("unknown job \"", job, "\""));
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest*,
                                    v1::ListJobsReply* reply) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  for (const auto& job : jobs_->All()) job->Info(reply->add_jobs());
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
  return ToGrpc(job->Suspects(request->window(), reply));
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

grpc::Status QueryService::WatchVerdicts(grpc::ServerContext* context,
                                         const v1::WatchVerdictsRequest* request,
                                         grpc::ServerWriter<v1::VerdictEvent>* writer) {
  std::shared_ptr<JobState> job;
  if (grpc::Status s = Lookup(*context, request->job(), &job); !s.ok()) return s;
  int64_t after = request->after_seq();
  while (!context->IsCancelled() && !shutting_down_) {
    for (const v1::VerdictEvent& ev : job->VerdictsAfter(after, std::chrono::milliseconds(200))) {
      if (!writer->Write(ev)) return grpc::Status::OK;
      after = ev.seq();
    }
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::GetHealth(grpc::ServerContext* context,
                                     const v1::GetHealthRequest* request,
                                     v1::GetHealthReply* reply) {
  std::shared_ptr<JobState> job;
  if (grpc::Status s = Lookup(*context, request->job(), &job); !s.ok()) return s;
  job->Health(reply);
  return grpc::Status::OK;
}

grpc::Status QueryService::Control(grpc::ServerContext* context, const v1::ControlCommand* request,
                                   v1::ControlReply* reply) {
  std::shared_ptr<JobState> job;
  if (grpc::Status s = Lookup(*context, request->job(), &job); !s.ok()) return s;
  const uint64_t id = next_request_id_++;
  reply->set_request_id(id);
  switch (request->action_case()) {
    case v1::ControlCommand::kPause:
    case v1::ControlCommand::kResume: {
      const bool pause = request->action_case() == v1::ControlCommand::kPause;
      job->SetPaused(pause);
      if (absl::Status s = job->Flush(); !s.ok()) return ToGrpc(s);
      v1::ControlRequest c = job->JobControl();
      c.set_request_id(id);
      const int reached = sessions_->Send(c);
      reply->set_message(absl::StrCat(pause ? "paused" : "resumed", " recording on job ",
                                      job->name(), "; told ", reached, " sidecar(s)"));
      return grpc::Status::OK;
    }
    case v1::ControlCommand::kSampleEvery: {
      job->SetSampleEvery(request->sample_every());
      v1::ControlRequest c = job->JobControl();
      c.set_request_id(id);
      const int reached = sessions_->Send(c);
      reply->set_message(absl::StrCat("stubs of job ", job->name(), " record one step in ",
                                      std::max<uint32_t>(1, request->sample_every()), "; told ",
                                      reached, " sidecar(s)"));
      return grpc::Status::OK;
    }
    case v1::ControlCommand::kConfig: {
      if (absl::Status s = job->ApplyConfig(request->config()); !s.ok()) return ToGrpc(s);
      if (absl::Status s = job->Flush(); !s.ok()) return ToGrpc(s);
      reply->set_message(absl::StrCat("job ", job->name(),
                                      ": new thresholds apply from the next step (the engine "
                                      "restarts its window and warm-up)"));
      return grpc::Status::OK;
    }
    case v1::ControlCommand::kTrace: {
      const v1::TraceRequest& t = request->trace();
      if (t.rank() < 0 || t.rank() >= job->world_size()) {
        return grpc::Status(
            grpc::INVALID_ARGUMENT,
            absl::StrCat("rank ", t.rank(), " is outside world size ", job->world_size()));
      }
      if (t.last_step() < t.first_step() || t.first_step() < 0 ||
          t.last_step() - t.first_step() >= 10'000) {
        return grpc::Status(grpc::INVALID_ARGUMENT,
                            absl::StrCat("trace steps [", t.first_step(), ", ", t.last_step(),
                                         "] must be a range of at most 10000 steps"));
      }
      v1::ControlRequest c = job->JobControl();
      c.set_request_id(id);
      c.set_rank(t.rank());
      c.set_trace_first_step(t.first_step());
      c.set_trace_last_step(t.last_step());
      if (sessions_->Send(c) == 0) return NoSidecar(*job, t.rank());
      reply->set_message(absl::StrCat("asked rank ", t.rank(), " for a detailed trace of steps ",
                                      t.first_step(), "..", t.last_step()));
      return grpc::Status::OK;
    }
    case v1::ControlCommand::kSelftest:
      return StartSelfTest(*job, request->selftest(), id, reply);
    default:
      return grpc::Status(grpc::INVALID_ARGUMENT, "no control action given");
  }
}

grpc::Status QueryService::StartSelfTest(const JobState& job, const v1::SelfTestCommand& command,
                                         uint64_t id, v1::ControlReply* reply) {
  if (self_tests_ == nullptr) {
    return grpc::Status(grpc::UNIMPLEMENTED, "this coordinator does not run self-tests");
  }
  SelfTestJobFacts facts;
  facts.job = job.name();
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
  if (!req.ok()) return ToGrpc(req.status());
  // The request carries the job-wide state too (paused, sampling): the sidecar applies it all.
  v1::ControlRequest c = *req;
  const v1::ControlRequest job_wide = job.JobControl();
  c.set_paused(job_wide.paused());
  c.set_sample_every(job_wide.sample_every());
  if (sessions_->Send(c) == 0) {
    self_tests_->Cancel(job.name(), id);
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
  const std::vector<v1::VerdictEvent> verdicts =
      job->VerdictsAfter(0, std::chrono::milliseconds(0));
  return ToGrpc(
      self_tests_->Report(job->name(), request->id(), verdicts, shm::MonotonicNowNs(), reply));
}

grpc::Status QueryService::ListNodes(grpc::ServerContext* context,
                                     const v1::ListNodesRequest* request,
                                     v1::ListNodesReply* reply) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (nodes_ == nullptr) {
    return grpc::Status(grpc::UNIMPLEMENTED, "this coordinator keeps no node ledger");
  }
  return ToGrpc(FillListNodes(*nodes_, *request, reply));
}

grpc::Status QueryService::ReportSweep(grpc::ServerContext* context, const v1::SweepReport* request,
                                       v1::SweepJudgement* reply) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (fleet_ == nullptr) {
    return grpc::Status(grpc::UNIMPLEMENTED, "this coordinator keeps no fleet baseline");
  }
  absl::StatusOr<v1::SweepJudgement> j = fleet_->Judge(*request, shm::RealtimeNowNs());
  if (!j.ok()) return ToGrpc(j.status());
  if (absl::Status s = fleet_->Flush(); !s.ok()) return ToGrpc(s);
  *reply = std::move(*j);
  return grpc::Status::OK;
}

}  // namespace stagefrontier
