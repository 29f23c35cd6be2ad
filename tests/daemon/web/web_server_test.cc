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
#include <condition_variable>
#include <mutex>
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

// An API handler that holds every /api/slow request until released: busy connections.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int waiting = 0;
  HttpReply Handle(absl::string_view path, absl::string_view query, absl::string_view auth) {
    if (path == "/api/slow") {
      std::unique_lock<std::mutex> lock(mu);
      ++waiting;
      cv.notify_all();
      cv.wait(lock, [this] { return open; });
    }
    return Echo(path, query, auth);
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
  void AwaitWaiting(int n) {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return waiting >= n; }));
  }
};

std::unique_ptr<WebServer> StartWith(Gate* gate, int max_connections, int per_client,
                                     int io_timeout_ms) {
  WebServerOptions o;
  o.listen = "127.0.0.1:0";
  o.max_connections = max_connections;
  o.max_connections_per_client = per_client;
  o.io_timeout_ms = io_timeout_ms;
  auto started = WebServer::Start(
      o, [gate](auto path, auto query, auto auth) { return gate->Handle(path, query, auth); });
  REQUIRE(started.ok());
  return std::move(*started);
}

void Send(int fd, const std::string& raw) {
  REQUIRE(::write(fd, raw.data(), raw.size()) == static_cast<ssize_t>(raw.size()));
}

TEST_CASE("503 only when every connection is busy; stopping ends open connections") {
  Gate gate;
  // Idle connections time out after 10 minutes: a stop that waited for them would outlast the
  // test's own time limit instead of returning at once.
  std::unique_ptr<WebServer> web = StartWith(&gate, 2, 16, 600'000);
  std::vector<int> busy = {Connect(web->port()), Connect(web->port())};
  for (int fd : busy) Send(fd, "GET /api/slow HTTP/1.1\r\nHost: x\r\n\r\n");
  gate.AwaitWaiting(2);
  const std::string refused = Exchange(web->port(), "GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
  CHECK_THAT(refused, Catch::StartsWith("HTTP/1.1 503 Service Unavailable"));
  CHECK(web->counters().refused_connections == 1);
  gate.Release();
  for (int fd : busy) {
    char buf[512];
    CHECK(::read(fd, buf, sizeof buf) > 0);  // answered; now idle, kept alive
  }
  web.reset();  // two idle connections open
  for (int fd : busy) {
    char c;
    CHECK(::read(fd, &c, 1) == 0);  // the server closed them
    ::close(fd);
  }
}

// Regression (issue 28, attack 5): SO_RCVTIMEO did not bound Asio's blocking reads, so 64
// silent connections made every page and API call answer 503 for good.
TEST_CASE("64+ idle connections from one client cannot lock out the page") {
  Gate gate;
  gate.Release();
  std::unique_ptr<WebServer> web = StartWith(&gate, 64, 16, 600'000);
  std::vector<int> idle;
  for (int i = 0; i < 80; ++i) idle.push_back(Connect(web->port()));
  // Wait until the server has seen all of them (some already closed to make room).
  for (int i = 0; i < 200 && web->counters().evicted < 80 - 16; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(web->counters().evicted == 80 - 16);
  for (int i = 0; i < 5; ++i) {
    const Response r = Get(web->port(), "/");
    CHECK(r.status == 200);
  }
  CHECK(web->counters().refused_connections == 0);
  for (int fd : idle) ::close(fd);
}

TEST_CASE("a silent or trickling connection is closed at the timeout") {
  Gate gate;
  gate.Release();
  std::unique_ptr<WebServer> web = StartWith(&gate, 64, 16, 300);
  const int silent = Connect(web->port());
  const int trickle = Connect(web->port());
  const auto start = std::chrono::steady_clock::now();
  // One byte of a request every 50 ms: never idle, never done.
  bool trickle_closed = false;
  for (const char c : std::string("GET / HTTP/1.1\r\nHost: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")) {
    if (::send(trickle, &c, 1, MSG_NOSIGNAL) != 1) {
      trickle_closed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  char buf[64];
  CHECK(::read(silent, buf, sizeof buf) == 0);  // closed, not timed out on our side (5 s)
  const ssize_t n = ::read(trickle, buf, sizeof buf);
  CHECK((trickle_closed || n <= 0));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(4));
  CHECK(web->counters().timed_out >= 2);
  ::close(silent);
  ::close(trickle);
  CHECK(Get(web->port(), "/").status == 200);
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
