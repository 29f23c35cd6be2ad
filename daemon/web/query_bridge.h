// The web view's JSON API. Each GET under /api/ is one Query RPC made over a gRPC channel to
// the coordinator itself (in-process), so the web view obeys exactly the rules of the gRPC
// API (token, limits, error codes) and shows the JSON that `sfctl --json` shows.
//
//   QueryBridge bridge(server->InProcessChannel(grpc::ChannelArguments()));
//   HttpReply r = bridge.Get("/api/suspects", "job=j1", "Bearer s3cret");
//   // r.status == 200, r.body == {"job":"j1","window":100,"verdict":{...},...}
//
// Paths (parameters in the query string, URL-encoded):
//   /api/jobs                                  ListJobs
//   /api/suspects?job=J[&window=N]             GetSuspects (the current window by default)
//   /api/verdicts?job=J[&after=SEQ]            the held verdicts, {"verdicts":[VerdictEvent...]}
//   /api/steps?job=J&from=A&to=B[&limit=N]     GetSteps
//   /api/health?job=J                          GetHealth
//   /api/captures?job=J                        ListCaptures
//   /api/capture_report?job=J&capture=ID       GetCaptureReport
//   /api/nodes[?class=C][&limit=N]             ListNodes
#ifndef STAGEFRONTIER_DAEMON_WEB_QUERY_BRIDGE_H_
#define STAGEFRONTIER_DAEMON_WEB_QUERY_BRIDGE_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "daemon/web/http_reply.h"
#include "grpcpp/channel.h"
#include "stagefrontier/v1/query.grpc.pb.h"

namespace stagefrontier {

class QueryBridge {
 public:
  explicit QueryBridge(std::shared_ptr<grpc::ChannelInterface> channel,
                       std::chrono::milliseconds deadline = std::chrono::seconds(10));

  // The reply to GET `path` with `query` (the URL's query string, still encoded) and the
  // request's Authorization header ("" if none; "Bearer TOKEN" is passed on as the gRPC
  // token). Never fails: 404 for an unknown path, 400 for a missing or malformed parameter,
  // and a failed RPC's status as its HTTP equivalent (401, 404, 400, 503, ...), each with a
  // body {"error": "...", "code": "NOT_FOUND"}. Thread-safe.
  HttpReply Get(absl::string_view path, absl::string_view query,
                absl::string_view authorization) const;

 private:
  std::unique_ptr<v1::Query::Stub> stub_;
  std::chrono::milliseconds deadline_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_WEB_QUERY_BRIDGE_H_
