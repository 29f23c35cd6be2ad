#include "daemon/coordinator/query_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "daemon/common/grpc_security.h"

namespace stagefrontier {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace

QueryService::QueryService(JobRegistry* jobs, SidecarSessions* sessions,
                           CoordinatorMetrics* metrics, std::string token)
    : jobs_(jobs), sessions_(sessions), metrics_(metrics), token_(std::move(token)) {}

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
      if (sessions_->Send(c) == 0) {
        return grpc::Status(grpc::UNAVAILABLE, absl::StrCat("no sidecar serves rank ", t.rank(),
                                                            " of job ", job->name(), " right now"));
      }
      reply->set_message(absl::StrCat("asked rank ", t.rank(), " for a detailed trace of steps ",
                                      t.first_step(), "..", t.last_step()));
      return grpc::Status::OK;
    }
    default:
      return grpc::Status(grpc::INVALID_ARGUMENT, "no control action given");
  }
}

}  // namespace stagefrontier
