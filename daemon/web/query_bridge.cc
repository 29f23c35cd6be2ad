#include "daemon/web/query_bridge.h"

#include <deque>
#include <functional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/proto_json.h"
#include "daemon/web/query_string.h"
#include "grpcpp/client_context.h"
#include "nlohmann/json.hpp"

namespace stagefrontier {
namespace {

// Verdicts shown by the timeline: the newest this many of those the coordinator holds.
constexpr size_t kMaxVerdicts = 500;

HttpReply Error(int status, absl::string_view code, absl::string_view message) {
  HttpReply r;
  r.status = status;
  r.body = nlohmann::json{{"error", std::string(message)}, {"code", std::string(code)}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

HttpReply FromStatus(const grpc::Status& s) {
  int http = 500;
  switch (s.error_code()) {
    case grpc::INVALID_ARGUMENT:
    case grpc::OUT_OF_RANGE:
      http = 400;
      break;
    case grpc::UNAUTHENTICATED:
      http = 401;
      break;
    case grpc::PERMISSION_DENIED:
      http = 403;
      break;
    case grpc::NOT_FOUND:
      http = 404;
      break;
    case grpc::FAILED_PRECONDITION:
      http = 409;  // e.g. a job with no accounted step yet
      break;
    case grpc::RESOURCE_EXHAUSTED:
      http = 429;
      break;
    case grpc::UNAVAILABLE:
      http = 503;
      break;
    case grpc::DEADLINE_EXCEEDED:
      http = 504;
      break;
    case grpc::UNIMPLEMENTED:
      http = 501;
      break;
    default:
      break;
  }
  static const char* const kCodes[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int c = static_cast<int>(s.error_code());
  return Error(http, c >= 0 && c <= 16 ? kCodes[c] : "UNKNOWN", s.error_message());
}

HttpReply Json(const grpc::Status& s, const google::protobuf::Message& reply) {
  if (!s.ok()) return FromStatus(s);
  HttpReply r;
  r.body = ProtoToJson(reply);
  return r;
}

// The parameters of one request, with typed reads that say which parameter is wrong.
class Params {
 public:
  explicit Params(std::map<std::string, std::string> p) : p_(std::move(p)) {}
  absl::StatusOr<std::string> Text(const std::string& name, bool required) const {
    auto it = p_.find(name);
    if (it == p_.end() || it->second.empty()) {
      if (required) return absl::InvalidArgumentError(absl::StrCat("parameter ", name, " missing"));
      return std::string();
    }
    return it->second;
  }
  absl::StatusOr<int64_t> Int(const std::string& name, int64_t fallback) const {
    auto it = p_.find(name);
    if (it == p_.end() || it->second.empty()) return fallback;
    int64_t v = 0;
    if (!absl::SimpleAtoi(it->second, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", name, " is not an integer: \"",
                                                     it->second.substr(0, 40), "\""));
    }
    return v;
  }

 private:
  std::map<std::string, std::string> p_;
};

absl::StatusOr<int32_t> Int32(const Params& p, const std::string& name, int32_t fallback) {
  absl::StatusOr<int64_t> v = p.Int(name, fallback);
  if (!v.ok()) return v.status();
  if (*v < INT32_MIN || *v > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("parameter ", name, " is out of range"));
  }
  return static_cast<int32_t>(*v);
}

HttpReply Bad(const absl::Status& s) { return Error(400, "INVALID_ARGUMENT", s.message()); }

// One function per path below: each reads its parameters and makes its call.
using Stub = v1::Query::Stub;

HttpReply Nodes(Stub& stub, grpc::ClientContext& ctx, const Params& p) {
  v1::ListNodesRequest req;
  absl::StatusOr<std::string> node_class = p.Text("class", false);
  absl::StatusOr<int32_t> limit = Int32(p, "limit", 0);
  if (!node_class.ok()) return Bad(node_class.status());
  if (!limit.ok()) return Bad(limit.status());
  req.set_node_class(*node_class);
  req.set_limit(*limit);
  v1::ListNodesReply reply;
  return Json(stub.ListNodes(&ctx, req, &reply), reply);
}

HttpReply Suspects(Stub& stub, grpc::ClientContext& ctx, const Params& p, const std::string& job) {
  v1::GetSuspectsRequest req;
  absl::StatusOr<int32_t> window = Int32(p, "window", 0);
  if (!window.ok()) return Bad(window.status());
  req.set_job(job);
  req.set_window(*window);
  v1::SuspectsReply reply;
  return Json(stub.GetSuspects(&ctx, req, &reply), reply);
}

HttpReply Steps(Stub& stub, grpc::ClientContext& ctx, const Params& p, const std::string& job) {
  v1::GetStepsRequest req;
  absl::StatusOr<int64_t> from = p.Int("from", 0);
  absl::StatusOr<int64_t> to = p.Int("to", INT64_MAX);
  absl::StatusOr<int32_t> limit = Int32(p, "limit", 0);
  for (const absl::Status& s : {from.status(), to.status(), limit.status()}) {
    if (!s.ok()) return Bad(s);
  }
  req.set_job(job);
  req.set_from_step(*from);
  req.set_to_step(*to);
  req.set_limit(*limit);
  v1::GetStepsReply reply;
  return Json(stub.GetSteps(&ctx, req, &reply), reply);
}

HttpReply Health(Stub& stub, grpc::ClientContext& ctx, const Params&, const std::string& job) {
  v1::GetHealthRequest req;
  req.set_job(job);
  v1::GetHealthReply reply;
  return Json(stub.GetHealth(&ctx, req, &reply), reply);
}

HttpReply Captures(Stub& stub, grpc::ClientContext& ctx, const Params&, const std::string& job) {
  v1::ListCapturesRequest req;
  req.set_job(job);
  v1::ListCapturesReply reply;
  return Json(stub.ListCaptures(&ctx, req, &reply), reply);
}

HttpReply CaptureReport(Stub& stub, grpc::ClientContext& ctx, const Params& p,
                        const std::string& job) {
  v1::GetCaptureReportRequest req;
  absl::StatusOr<int64_t> capture = p.Int("capture", -1);
  if (!capture.ok()) return Bad(capture.status());
  if (*capture < 0) return Bad(absl::InvalidArgumentError("parameter capture missing"));
  req.set_job(job);
  req.set_capture(static_cast<uint64_t>(*capture));
  v1::GetCaptureReportReply reply;
  return Json(stub.GetCaptureReport(&ctx, req, &reply), reply);
}

// The held verdicts after `after`, newest kMaxVerdicts.
HttpReply Verdicts(Stub& stub, grpc::ClientContext& ctx, const Params& p, const std::string& job) {
  v1::WatchVerdictsRequest req;
  absl::StatusOr<int64_t> after = p.Int("after", 0);
  if (!after.ok()) return Bad(after.status());
  req.set_job(job);
  req.set_after_seq(*after);
  req.set_held_only(true);
  std::unique_ptr<grpc::ClientReader<v1::VerdictEvent>> reader = stub.WatchVerdicts(&ctx, req);
  std::deque<std::string> events;
  v1::VerdictEvent e;
  while (reader->Read(&e)) {
    events.push_back(ProtoToJson(e));
    if (events.size() > kMaxVerdicts) events.pop_front();
  }
  const grpc::Status s = reader->Finish();
  if (!s.ok()) return FromStatus(s);
  HttpReply r;
  r.body = absl::StrCat("{\"verdicts\":[", absl::StrJoin(events, ","), "]}");
  return r;
}

using JobRoute = HttpReply (*)(Stub&, grpc::ClientContext&, const Params&, const std::string&);

// The paths about one job (the job parameter required).
JobRoute JobRouteFor(absl::string_view path) {
  static constexpr std::pair<absl::string_view, JobRoute> kRoutes[] = {
      {"/api/suspects", Suspects}, {"/api/verdicts", Verdicts},
      {"/api/steps", Steps},       {"/api/health", Health},
      {"/api/captures", Captures}, {"/api/capture_report", CaptureReport},
  };
  for (const auto& [p, route] : kRoutes) {
    if (p == path) return route;
  }
  return nullptr;
}

}  // namespace

QueryBridge::QueryBridge(std::shared_ptr<grpc::ChannelInterface> channel,
                         std::chrono::milliseconds deadline)
    : stub_(v1::Query::NewStub(std::move(channel))), deadline_(deadline) {}

HttpReply QueryBridge::Get(absl::string_view path, absl::string_view query,
                           absl::string_view authorization) const {
  absl::StatusOr<std::map<std::string, std::string>> parsed = ParseQueryString(query);
  if (!parsed.ok()) return Bad(parsed.status());
  const Params p(std::move(*parsed));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline_);
  if (absl::ConsumePrefix(&authorization, "Bearer ")) {
    AttachToken(&ctx, std::string(absl::StripAsciiWhitespace(authorization)));
  }
  if (path == "/api/jobs") {
    v1::ListJobsReply reply;
    return Json(stub_->ListJobs(&ctx, v1::ListJobsRequest(), &reply), reply);
  }
  if (path == "/api/nodes") return Nodes(*stub_, ctx, p);
  const JobRoute route = JobRouteFor(path);
  if (route == nullptr) {
    return Error(404, "NOT_FOUND", absl::StrCat("no such API path: ", path.substr(0, 100)));
  }
  absl::StatusOr<std::string> job = p.Text("job", /*required=*/true);
  if (!job.ok()) return Bad(job.status());
  return route(*stub_, ctx, p, *job);
}

}  // namespace stagefrontier
