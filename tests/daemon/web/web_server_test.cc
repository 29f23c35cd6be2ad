// The web view's server over real sockets: the page and assets, what reaches the API handler,
// bad HTTP, keep-alive, the connection bound, and a stop with connections open. Tagged tsan:
// the server runs one thread per connection.
#include "daemon/web/web_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "daemon/web/web_assets.h"

namespace stagefrontier {
namespace {

// What the API answers here: the path, query and token it was given, echoed as JSON.
HttpReply Echo(absl::string_view path, absl::string_view query, absl::string_view auth) {
  HttpReply r;
  r.status = auth == "Bearer s3cret" ? 200 : 401;
  r.body = std::string(path) + "|" + std::string(query) + "|" + std::string(auth);
  return r;
}

struct Fixture {
  explicit Fixture(int max_connections = 64, int io_timeout_ms = 2000) {
    WebServerOptions o;
    o.listen = "127.0.0.1:0";
    o.max_connections = max_connections;
    o.io_timeout_ms = io_timeout_ms;
    auto started = WebServer::Start(o, Echo);
    REQUIRE(started.ok());
    web = std::move(*started);
    REQUIRE(web->port() > 0);
  }
  std::unique_ptr<WebServer> web;
};

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// Sends `raw` and returns everything the server says until it closes the connection.
std::string Exchange(int port, const std::string& raw) {
  const int fd = Connect(port);
  REQUIRE(::write(fd, raw.data(), raw.size()) == static_cast<ssize_t>(raw.size()));
  std::string got;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return got;
}

struct Response {
  int status = 0;
  std::string head;
  std::string body;
};

Response Get(int port, const std::string& target, const std::string& extra = "",
             const std::string& method = "GET") {
  const std::string raw =
      Exchange(port, method + " " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" +
                         extra + "\r\n");
  Response r;
  const size_t end = raw.find("\r\n\r\n");
  REQUIRE(end != std::string::npos);
  r.head = raw.substr(0, end);
  r.body = raw.substr(end + 4);
  REQUIRE(raw.rfind("HTTP/1.1 ", 0) == 0);
  r.status = std::stoi(raw.substr(9, 3));
  return r;
}

TEST_CASE("the page, its assets and unknown paths") {
  Fixture f;
  Response page = Get(f.web->port(), "/");
  CHECK(page.status == 200);
  CHECK_THAT(page.head, Catch::Contains("Content-Type: text/html"));
  CHECK_THAT(page.head, Catch::Contains("Content-Security-Policy: default-src 'self'"));
  CHECK_THAT(page.body, Catch::Contains("<canvas id=\"heatmap-chart\">"));
  Response chart = Get(f.web->port(), "/assets/chart.min.js");
  CHECK(chart.status == 200);
  REQUIRE(FindWebAsset("chart.min.js") != nullptr);
  CHECK(chart.body.size() == FindWebAsset("chart.min.js")->size);
  CHECK_THAT(chart.body, Catch::Contains("Chart.js"));
  for (const char* missing : {"/nope", "/assets/", "/assets/../index.html", "/assets/x/app.js"}) {
    INFO(missing);
    CHECK(Get(f.web->port(), missing).status == 404);
  }
  Response head = Get(f.web->port(), "/", "", "HEAD");
  CHECK(head.status == 200);
  CHECK(head.body.empty());
  CHECK_THAT(head.head, Catch::Contains("Content-Length: " +
                                        std::to_string(FindWebAsset("index.html")->size)));
  Response post = Get(f.web->port(), "/api/jobs", "", "POST");
  CHECK(post.status == 405);
  CHECK_THAT(post.head, Catch::Contains("Allow: GET, HEAD"));
}

TEST_CASE("/api/ requests reach the handler with their query and Authorization header") {
  Fixture f;
  Response ok = Get(f.web->port(), "/api/steps?job=j1&from=5", "Authorization: Bearer s3cret\r\n");
  CHECK(ok.status == 200);
  CHECK(ok.body == "/api/steps|job=j1&from=5|Bearer s3cret");
  CHECK_THAT(ok.head, Catch::Contains("Content-Type: application/json"));
  CHECK_THAT(ok.head, Catch::Contains("Cache-Control: no-store"));
  Response no_token = Get(f.web->port(), "/api/jobs");
  CHECK(no_token.status == 401);
  CHECK(no_token.body == "/api/jobs||");
}

TEST_CASE("bad HTTP gets 400; a connection serves several requests") {
  Fixture f;
  const std::string garbage = Exchange(f.web->port(), "GARBAGE\r\n\r\n");
  CHECK_THAT(garbage, Catch::StartsWith("HTTP/1.1 400 Bad Request"));
  const std::string body =
      Exchange(f.web->port(), "GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  CHECK_THAT(body, Catch::StartsWith("HTTP/1.1 400 Bad Request"));
  const std::string two = Exchange(f.web->port(),
                                   "GET /api/steps?job=j1 HTTP/1.1\r\nHost: x\r\n"
                                   "Authorization: Bearer s3cret\r\n\r\n"
                                   "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK_THAT(two, Catch::StartsWith("HTTP/1.1 200 OK"));
  CHECK_THAT(two, Catch::Contains("HTTP/1.1 404 Not Found"));
  CHECK(f.web->counters().bad_requests == 2);
  CHECK(f.web->counters().requests == 4);
}

TEST_CASE("connections beyond the bound get 503; stopping ends open connections") {
  // Idle connections time out after 10 minutes: a stop that waited for them would outlast the
  // test's own time limit instead of returning at once.
  Fixture f(/*max_connections=*/2, /*io_timeout_ms=*/600'000);
  std::vector<int> idle = {Connect(f.web->port()), Connect(f.web->port())};
  // Wait until both are being served (counted), then one more is refused.
  std::string refused;
  for (int i = 0; i < 50 && refused.empty(); ++i) {
    const std::string got = Exchange(f.web->port(), "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
    if (got.rfind("HTTP/1.1 503", 0) == 0) refused = got;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK_THAT(refused, Catch::StartsWith("HTTP/1.1 503 Service Unavailable"));
  CHECK(f.web->counters().refused_connections >= 1);
  f.web.reset();  // two idle connections open
  for (int fd : idle) {
    char c;
    CHECK(::read(fd, &c, 1) == 0);  // the server closed them
    ::close(fd);
  }
}

TEST_CASE("bad listen addresses and TLS files are refused with the reason") {
  WebServerOptions o;
  for (const char* bad : {"nohost", "127.0.0.1:99999", "localhost:80", "1.2.3:80", ":80"}) {
    o.listen = bad;
    auto s = WebServer::Start(o, Echo);
    INFO(bad);
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == absl::StatusCode::kInvalidArgument);
  }
  o.listen = "127.0.0.1:0";
  o.tls_cert = "/nonexistent/cert.pem";
  auto no_key = WebServer::Start(o, Echo);
  REQUIRE_FALSE(no_key.ok());
  CHECK_THAT(std::string(no_key.status().message()), Catch::Contains("certificate and its key"));
  o.tls_key = "/nonexistent/key.pem";
  auto missing = WebServer::Start(o, Echo);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(std::string(missing.status().message()),
             Catch::Contains("cannot use /nonexistent/cert.pem"));
  // An address in use.
  Fixture f;
  o = WebServerOptions();
  o.listen = "127.0.0.1:" + std::to_string(f.web->port());
  auto taken = WebServer::Start(o, Echo);
  REQUIRE_FALSE(taken.ok());
  CHECK(taken.status().code() == absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace stagefrontier
