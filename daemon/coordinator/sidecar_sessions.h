// The sidecars connected to the coordinator right now, and which (job, rank) each serves, so
// that a control request reaches the node whose segment holds that rank's slot.
//
//   auto session = sessions.Add("node-a", stream);      // in the ingest handler
//   sessions.Bind(*session, "run42", 3);                // rank 3 declared on that stream
//   int reached = sessions.Send(request);               // from a Control call
//   sessions.Remove(session);                           // before the handler returns
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_SIDECAR_SESSIONS_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_SIDECAR_SESSIONS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "grpcpp/grpcpp.h"
#include "grpcpp/support/sync_stream.h"
#include "stagefrontier/v1/ingest.pb.h"

namespace stagefrontier {

using IngestStream = grpc::ServerReaderWriterInterface<v1::CoordinatorMessage, v1::SidecarMessage>;

class SidecarSessions {
 public:
  struct Session {
    uint64_t id = 0;
    std::string node;
    std::mutex write_mu;  // one writer at a time on the stream; guards `stream`
    IngestStream* stream = nullptr;
    // Writes one message; false once the stream is gone or broken.
    bool Write(const v1::CoordinatorMessage& msg);
  };

  std::shared_ptr<Session> Add(std::string node, IngestStream* stream);
  // Forgets the session and waits for any write in flight: the stream may be freed after.
  void Remove(const std::shared_ptr<Session>& session);
  // Records that `session` serves (job, rank); returns true if it did not already.
  bool Bind(const std::shared_ptr<Session>& session, const std::string& job, int32_t rank);

  // Sends `request` to the session serving (job, rank), or to every session serving some
  // rank of the job when rank is -1. Returns how many sessions it reached.
  int Send(const v1::ControlRequest& request);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::shared_ptr<Session>> sessions_;
  std::map<std::pair<std::string, int32_t>, std::weak_ptr<Session>> by_rank_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_SIDECAR_SESSIONS_H_
