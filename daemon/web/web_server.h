// The coordinator's web view over HTTP or HTTPS (--http-listen; off by default): the page and
// its assets at / and /assets/NAME, and under /api/ what the ApiHandler answers (the
// coordinator's is QueryBridge::Get, query_bridge.h). Served with
// Boost.Beast, one thread per connection up to a bound; a connection waiting for a request
// gives way to a new one at the bound (all clients) or at the per-client bound, so idle
// connections cannot lock the view out, and every read and write has a deadline. With TLS files it
// serves HTTPS only, with the gRPC port's certificate, key and client CA; the API asks for the gRPC
// port's token
// (`Authorization: Bearer TOKEN`, checked by the Query service itself); the page and its
// assets hold no data and need none.
//
//   WebServerOptions o;
//   o.listen = "127.0.0.1:7313";
//   absl::StatusOr<std::unique_ptr<WebServer>> web = WebServer::Start(o,
//       [&bridge](auto path, auto query, auto auth) { return bridge.Get(path, query, auth); });
//   if (!web.ok()) return Fail(web.status());
//   ... (*web)->port() ...   // serving until destroyed
#ifndef STAGEFRONTIER_DAEMON_WEB_WEB_SERVER_H_
#define STAGEFRONTIER_DAEMON_WEB_WEB_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/web/http_reply.h"

namespace stagefrontier {

struct WebServerOptions {
  std::string listen;  // HOST:PORT or [IPV6]:PORT; port 0 picks a free one
  // TLS: both or neither (PEM files, as for the gRPC port).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;   // also require client certificates signed by this CA
  // At either bound a new connection closes the longest-waiting idle one (of that client, at
  // the per-client bound); 503 only when every connection is busy answering a request.
  int max_connections = 64;
  int max_connections_per_client = 16;  // per client address
  // A request must arrive whole, and an answer be taken whole, within this; a connection
  // waiting longer for its next request is closed too.
  int io_timeout_ms = 10'000;
};

// What the server has done, for /metrics and tests.
struct WebServerCounters {
  uint64_t requests = 0;
  uint64_t refused_connections = 0;  // 503: at a bound with every connection busy
  uint64_t bad_requests = 0;         // unparsable HTTP, failed TLS handshakes
  uint64_t timed_out = 0;            // connections closed at io_timeout_ms
  uint64_t evicted = 0;              // idle connections closed to make room at a bound
};

class WebServer {
 public:
  // Starts serving. InvalidArgument for a malformed listen address or TLS files that cannot
  // be used (with OpenSSL's words), Unavailable when the address cannot be bound.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<WebServer>> Start(
      const WebServerOptions& options, ApiHandler api);
  // Stops accepting, ends open connections and waits for their threads.
  ~WebServer();
  WebServer(const WebServer&) = delete;
  WebServer& operator=(const WebServer&) = delete;

  int port() const;
  bool tls() const;
  WebServerCounters counters() const;

  struct Impl;

 private:
  explicit WebServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_WEB_WEB_SERVER_H_
