// One HTTP answer of the web view's API (status, content type, body), as the JSON API
// (query_bridge.h) makes it and the server (web_server.h) sends it.
//
//   HttpReply r;
//   r.status = 404;
//   r.body = R"({"error":"unknown job \"x\"","code":"NOT_FOUND"})";
#ifndef STAGEFRONTIER_DAEMON_WEB_HTTP_REPLY_H_
#define STAGEFRONTIER_DAEMON_WEB_HTTP_REPLY_H_

#include <functional>
#include <string>

#include "absl/strings/string_view.h"

namespace stagefrontier {

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

// Answers GET PATH?QUERY under /api/ with the request's Authorization header ("" if none).
// Called on the server's connection threads, concurrently: it must be thread-safe.
using ApiHandler = std::function<HttpReply(absl::string_view path, absl::string_view query,
                                           absl::string_view authorization)>;

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_WEB_HTTP_REPLY_H_
