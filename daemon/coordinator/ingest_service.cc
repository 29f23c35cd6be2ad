#include "daemon/coordinator/ingest_service.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/grpc_security.h"
#include "shm/monotonic_clock.h"

namespace stagefrontier {
IngestService::IngestService(JobRegistry* jobs, SidecarSessions* sessions,
                             CoordinatorMetrics* metrics, std::string token, Log log)
    : jobs_(jobs),
      sessions_(sessions),
      metrics_(metrics),
      token_(std::move(token)),
      log_(std::move(log)),
      acker_(log_) {}

grpc::Status IngestService::Fail(grpc::StatusCode code, const std::string& node,
                                 const std::string& message) {
  const auto status_code = static_cast<absl::StatusCode>(code);  // the same numbering
  metrics_->stream_errors(status_code).Increment();
  if (log_)
    log_(absl::StrCat("ingest stream from ", node.empty() ? "?" : node,
                      " ended: ", absl::StatusCodeToString(status_code), ": ", message));
  return grpc::Status(code, message);
}

grpc::Status IngestService::Stream(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::SidecarMessage>* stream) {
  if (!TokenMatches(*context, token_)) {
    metrics_->unauthenticated().Increment();
    return Fail(grpc::UNAUTHENTICATED, context->peer(),
                "missing or wrong token (authorization: Bearer ...)");
  }
  v1::SidecarMessage msg;
  if (!stream->Read(&msg)) return grpc::Status::OK;
  if (!msg.has_hello()) {
    return Fail(grpc::FAILED_PRECONDITION, context->peer(),
                "the first message of an ingest stream must be Hello");
  }
  if (msg.hello().protocol_version() != v1::PROTOCOL_VERSION_1) {
    return Fail(grpc::FAILED_PRECONDITION, msg.hello().node(),
                absl::StrCat("protocol version ", msg.hello().protocol_version(),
                             " is not supported; this coordinator speaks version 1"));
  }
  const std::string node = msg.hello().node();
  auto session = sessions_->Add(node, stream);
  metrics_->sidecar_streams().Increment();
  if (log_) log_(absl::StrCat("sidecar ", node, " (", msg.hello().sidecar_id(), ") connected"));
  struct Declared {
    std::shared_ptr<JobState> job;
    absl::Status status;
  };
  std::map<std::pair<std::string, int32_t>, Declared> declared;
  grpc::Status result = grpc::Status::OK;

  while (stream->Read(&msg)) {
    if (msg.has_batch()) {
      const v1::StepBatch& batch = msg.batch();
      metrics_->ingest_batches().Increment();
      v1::CoordinatorMessage reply;
      v1::BatchAck* ack = reply.mutable_ack();
      ack->set_batch_seq(batch.batch_seq());
      std::vector<v1::ControlRequest> to_send;
      const auto reject = [&](const std::string& job, int32_t rank, const absl::Status& s,
                              uint32_t records) {
        v1::Rejection* r = ack->add_rejections();
        r->set_job(job);
        r->set_rank(rank);
        r->set_code(static_cast<int32_t>(s.code()));
        r->set_message(std::string(s.message()));
        r->set_records(records);
        metrics_->rejections(s.code()).Increment();
      };
      for (const v1::RankDeclaration& d : batch.declarations()) {
        absl::StatusOr<std::shared_ptr<JobState>> job = jobs_->Declare(d);
        Declared& entry = declared[{d.job(), d.rank()}];
        if (!job.ok()) {
          entry = {nullptr, job.status()};
          reject(d.job(), d.rank(), job.status(), 0);
          if (log_) log_(absl::StrCat("sidecar ", node, ": ", job.status().message()));
          continue;
        }
        entry = {*job, absl::OkStatus()};
        if (sessions_->Bind(session, d.job(), d.rank())) {
          v1::ControlRequest c = (*job)->JobControl();
          if (c.paused() || c.sample_every() > 1) to_send.push_back(std::move(c));
        }
      }
      std::set<JobState*> touched;
      std::vector<std::shared_ptr<JobState>> touched_jobs;
      const int64_t now = shm::MonotonicNowNs();
      for (const v1::RankSteps& rs : batch.steps()) {
        auto it = declared.find({rs.job(), rs.rank()});
        if (it == declared.end()) {
          reject(rs.job(), rs.rank(),
                 absl::FailedPreconditionError(absl::StrCat("job ", rs.job(), " rank ", rs.rank(),
                                                            " was not declared on this stream")),
                 rs.count());
          continue;
        }
        if (!it->second.status.ok()) {
          reject(rs.job(), rs.rank(), it->second.status, rs.count());
          continue;
        }
        absl::StatusOr<IngestCounts> c = it->second.job->Ingest(rs, node, now);
        if (!c.ok()) {
          if (c.status().code() == absl::StatusCode::kInvalidArgument) {
            result = Fail(
                grpc::INVALID_ARGUMENT, node,
                absl::StrCat("malformed batch ", batch.batch_seq(), ": ", c.status().message()));
            break;
          }
          reject(rs.job(), rs.rank(), c.status(), rs.count());
          continue;
        }
        ack->set_accepted(ack->accepted() + c->accepted);
        ack->set_duplicates(ack->duplicates() + c->duplicates);
        ack->set_late(ack->late() + c->late);
        if (touched.insert(it->second.job.get()).second) touched_jobs.push_back(it->second.job);
      }
      if (!result.ok()) break;
      // Account what is complete now; acknowledge once durable (group commit, off this thread).
      for (const auto& job : touched_jobs) job->CloseDue(now);
      acker_.Enqueue(session, std::move(reply), std::move(touched_jobs));
      for (const v1::ControlRequest& c : to_send) {
        v1::CoordinatorMessage m;
        *m.mutable_control() = c;
        session->Write(m);
      }
    } else if (msg.has_health()) {
      for (const v1::SlotHealth& h : msg.health().slots()) {
        if (auto job = jobs_->Find(h.job())) job->UpdateStubHealth(h, node);
      }
    } else if (msg.has_control_ack()) {
      const v1::ControlAck& a = msg.control_ack();
      if (!a.applied() && log_) {
        log_(absl::StrCat("sidecar ", node, " could not apply control request ", a.request_id(),
                          " for job ", a.job(), ": ", a.error()));
      }
    } else {
      result = Fail(grpc::INVALID_ARGUMENT, node, "an empty or unknown ingest message");
      break;
    }
  }
  sessions_->Remove(session);
  metrics_->sidecar_streams().Decrement();
  if (log_ && result.ok()) log_(absl::StrCat("sidecar ", node, " disconnected"));
  return result;
}

}  // namespace stagefrontier
