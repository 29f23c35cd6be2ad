#include "daemon/web/web_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "daemon/common/host_port.h"
#include "daemon/web/web_assets.h"

namespace stagefrontier {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

// The page may load its own scripts and styles and call its own API; nothing else.
constexpr char kContentSecurityPolicy[] =
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "frame-ancestors 'none'";

struct Reply {
  http::status status = http::status::ok;
  std::string content_type;
  std::string body;
  const unsigned char* data = nullptr;  // an asset's bytes, instead of `body`
  size_t size = 0;
  bool cache = false;
};

Reply Text(http::status status, const char* type, std::string body) {
  Reply r;
  r.status = status;
  r.content_type = type;
  r.body = std::move(body);
  return r;
}

using Clock = std::chrono::steady_clock;

}  // namespace

struct WebServer::Impl {
  WebServerOptions options;
  ApiHandler api;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::optional<asio::ssl::context> tls;
  int port = 0;
  std::thread accept_thread;

  // A live connection. Beast's synchronous calls have no timeout (SO_RCVTIMEO does not help:
  // Asio polls again after EAGAIN), so the reaper thread shuts down a connection whose
  // deadline passed, which ends its blocked read or write.
  struct Conn {
    std::string peer;              // the client's address
    Clock::time_point deadline{};  // of the read or write under way; none while answering
    bool armed = false;
    bool waiting = true;              // waiting for (or reading) a request, not answering one
    Clock::time_point waiting_since;  // when it began waiting
    bool closing = false;             // shut down already (deadline, eviction, stop)
  };
  mutable std::mutex mu;
  std::condition_variable idle;       // a connection ended
  std::condition_variable reaper_cv;  // stopping
  std::map<int, Conn> conns;          // by descriptor; shut down by Stop
  bool stopping = false;
  std::thread reaper;
  std::atomic<uint64_t> requests{0}, refused{0}, bad{0}, timed_out{0}, evicted{0};

  Reply Answer(const http::request<http::empty_body>& req) const;
  template <class Stream>
  void Converse(Stream& stream, int fd);
  void Serve(tcp::socket socket);
  void AcceptLoop();
  void ReapLoop();
  // Sets the connection's deadline io_timeout_ms from now (armed) or none, and whether it is
  // waiting for a request.
  void Arm(int fd, bool armed, bool waiting);
  // Makes room for one more connection from `peer`: true if it may be served, after shutting
  // down the longest-waiting idle connection when a bound is reached (idle connections never
  // lock the view out; only connections busy with requests do). Called under mu.
  bool MakeRoomLocked(const std::string& peer);
  void ShutdownLocked(int fd, Conn& c);
  void Stop();
};

Reply WebServer::Impl::Answer(const http::request<http::empty_body>& req) const {
  if (req.method() != http::verb::get && req.method() != http::verb::head) {
    Reply r = Text(http::status::method_not_allowed, "application/json",
                   R"({"error":"only GET and HEAD","code":"METHOD_NOT_ALLOWED"})");
    return r;
  }
  const std::string target(req.target());
  const size_t q = target.find('?');
  const std::string path = target.substr(0, q);
  const std::string query = q == std::string::npos ? "" : target.substr(q + 1);
  if (absl::StartsWith(path, "/api/")) {
    const auto auth = req.find(http::field::authorization);
    const HttpReply h =
        api(path, query,
            auth == req.end() ? absl::string_view()
                              : absl::string_view(auth->value().data(), auth->value().size()));
    return Text(static_cast<http::status>(h.status), h.content_type.c_str(), h.body);
  }
  const std::string name = path == "/"                          ? "index.html"
                           : absl::StartsWith(path, "/assets/") ? path.substr(8)
                                                                : std::string();
  const WebAsset* a =
      name.empty() || absl::StrContains(name, '/') ? nullptr : FindWebAsset(name.c_str());
  if (a == nullptr)
    return Text(http::status::not_found, "text/plain; charset=utf-8", "not found\n");
  Reply r;
  r.content_type = a->content_type;
  r.data = a->data;
  r.size = a->size;
  r.cache = name != "index.html";
  return r;
}

void WebServer::Impl::Arm(int fd, bool armed, bool waiting) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = conns.find(fd);
  if (it == conns.end()) return;
  Conn& c = it->second;
  c.armed = armed;
  c.deadline = Clock::now() + std::chrono::milliseconds(options.io_timeout_ms);
  if (waiting && !c.waiting) c.waiting_since = Clock::now();
  c.waiting = waiting;
}

void WebServer::Impl::ShutdownLocked(int fd, Conn& c) {
  c.closing = true;
  ::shutdown(fd, SHUT_RDWR);
}

bool WebServer::Impl::MakeRoomLocked(const std::string& peer) {
  int total = 0, from_peer = 0;
  for (const auto& [fd, c] : conns) {
    if (c.closing) continue;
    ++total;
    if (c.peer == peer) ++from_peer;
  }
  const bool peer_full = from_peer >= options.max_connections_per_client;
  if (!peer_full && total < options.max_connections) return true;
  // The longest-waiting idle connection (of this client when it is the client that is full).
  auto victim = conns.end();
  for (auto it = conns.begin(); it != conns.end(); ++it) {
    const Conn& c = it->second;
    if (c.closing || !c.waiting || (peer_full && c.peer != peer)) continue;
    if (victim == conns.end() || c.waiting_since < victim->second.waiting_since) victim = it;
  }
  if (victim == conns.end()) return false;  // every connection is answering a request: real load
  ShutdownLocked(victim->first, victim->second);
  ++evicted;
  return true;
}

void WebServer::Impl::ReapLoop() {
  const auto tick = std::chrono::milliseconds(std::clamp(options.io_timeout_ms / 4, 10, 250));
  std::unique_lock<std::mutex> lock(mu);
  while (!stopping) {
    reaper_cv.wait_for(lock, tick, [this] { return stopping; });
    const Clock::time_point now = Clock::now();
    for (auto& [fd, c] : conns) {
      if (c.closing || !c.armed || c.deadline > now) continue;
      ShutdownLocked(fd, c);
      ++timed_out;
    }
  }
}

template <class Stream>
void WebServer::Impl::Converse(Stream& stream, int fd) {
  boost::beast::flat_buffer buffer(16 << 10);
  for (;;) {
    http::request_parser<http::empty_body> parser;
    parser.header_limit(16 << 10);
    parser.body_limit(0);  // GET and HEAD carry no body
    boost::system::error_code ec;
    // The whole request must arrive within the timeout: a client trickling bytes is cut too.
    Arm(fd, /*armed=*/true, /*waiting=*/true);
    http::read(stream, buffer, parser, ec);
    Arm(fd, /*armed=*/false, /*waiting=*/false);
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::ssl::error::stream_truncated) {
      return;
    }
    const bool parsed = !ec;
    if (!parsed && !parser.is_header_done()) {
      // Timeouts and resets end quietly; a malformed request gets its 400 first.
      if (ec.category() != http::make_error_code(http::error::bad_target).category()) {
        return;
      }
    }
    ++requests;
    http::response<http::string_body> res;
    Reply r;
    bool keep_alive = false;
    if (!parsed) {
      ++bad;
      r = Text(http::status::bad_request, "text/plain; charset=utf-8",
               absl::StrCat("bad request: ", ec.message(), "\n"));
      res.version(11);
    } else {
      const http::request<http::empty_body>& req = parser.get();
      r = Answer(req);
      res.version(req.version());
      keep_alive = req.keep_alive();
    }
    res.result(r.status);
    res.set(http::field::content_type, r.content_type);
    res.set(http::field::cache_control, r.cache ? "max-age=300" : "no-store");
    res.set("X-Content-Type-Options", "nosniff");
    res.set("X-Frame-Options", "DENY");
    res.set("Referrer-Policy", "no-referrer");
    res.set("Content-Security-Policy", kContentSecurityPolicy);
    if (r.status == http::status::method_not_allowed) res.set(http::field::allow, "GET, HEAD");
    const bool head = parsed && parser.get().method() == http::verb::head;
    const size_t size = r.data != nullptr ? r.size : r.body.size();
    if (!head) {
      if (r.data != nullptr)
        res.body().assign(reinterpret_cast<const char*>(r.data), r.size);
      else
        res.body() = std::move(r.body);
    }
    res.content_length(size);
    res.keep_alive(keep_alive);
    http::serializer<false, http::string_body> sr(res);
    Arm(fd, /*armed=*/true, /*waiting=*/false);  // a client that does not read is cut
    if (head) sr.split(true);
    if (head) {
      http::write_header(stream, sr, ec);
    } else {
      http::write(stream, sr, ec);
    }
    if (ec || !keep_alive) return;
  }
}

void WebServer::Impl::Serve(tcp::socket socket) {
  const int fd = socket.native_handle();
  if (tls.has_value()) {
    asio::ssl::stream<tcp::socket&> stream(socket, *tls);
    boost::system::error_code ec;
    Arm(fd, /*armed=*/true, /*waiting=*/true);
    stream.handshake(asio::ssl::stream_base::server, ec);
    if (ec) {
      ++bad;
    } else {
      Converse(stream, fd);
      Arm(fd, /*armed=*/true, /*waiting=*/false);
      stream.shutdown(ec);
    }
  } else {
    Converse(socket, fd);
  }
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  std::lock_guard<std::mutex> lock(mu);
  conns.erase(fd);
  socket.close(ignored);  // under the lock: Stop must not shut down a reused descriptor
  idle.notify_all();
}

void WebServer::Impl::AcceptLoop() {
  for (;;) {
    boost::system::error_code ec;
    tcp::socket socket(io);
    acceptor.accept(socket, ec);
    std::unique_lock<std::mutex> lock(mu);
    if (stopping) return;
    if (ec) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // e.g. out of descriptors
      continue;
    }
    boost::system::error_code peer_ec;
    const std::string peer = socket.remote_endpoint(peer_ec).address().to_string();
    if (!MakeRoomLocked(peer)) {
      lock.unlock();
      ++refused;
      static const char kBusy[] =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      // Never blocks the accept loop: a client that does not read loses the answer.
      socket.non_blocking(true, ec);
      if (!tls.has_value()) asio::write(socket, asio::buffer(kBusy, sizeof(kBusy) - 1), ec);
      continue;
    }
    Conn& c = conns[socket.native_handle()];
    c.peer = peer;
    c.waiting_since = Clock::now();
    std::thread(&Impl::Serve, this, std::move(socket)).detach();
  }
}

void WebServer::Impl::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
    // Wakes the blocked accept() and every blocked read: they return with an error.
    ::shutdown(acceptor.native_handle(), SHUT_RDWR);
    for (auto& [fd, c] : conns) ShutdownLocked(fd, c);
    reaper_cv.notify_all();
  }
  if (accept_thread.joinable()) accept_thread.join();
  if (reaper.joinable()) reaper.join();
  std::unique_lock<std::mutex> lock(mu);
  idle.wait(lock, [&] { return conns.empty(); });
}

absl::StatusOr<std::unique_ptr<WebServer>> WebServer::Start(const WebServerOptions& options,
                                                            ApiHandler api) {
  const std::optional<HostPort> split = SplitHostPort(options.listen);
  int port = -1;
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(split ? split->host : "", ec);
  if (!split || ec || !absl::SimpleAtoi(split->port, &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http-listen ", options.listen, ": want ADDRESS:PORT, e.g. 127.0.0.1:7313"));
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("web view TLS needs both a certificate and its key");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->api = std::move(api);
  if (!options.tls_cert.empty()) {
    impl->tls.emplace(asio::ssl::context::tls_server);
    asio::ssl::context& t = *impl->tls;
    t.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                      asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                      asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use,
                  ec);
    const auto fail = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat("web view TLS: cannot use ", what, ": ", ec.message()));
    };
    if (t.use_certificate_chain_file(options.tls_cert, ec)) return fail(options.tls_cert);
    if (t.use_private_key_file(options.tls_key, asio::ssl::context::pem, ec)) {
      return fail(options.tls_key);
    }
    if (!options.tls_client_ca.empty()) {
      if (t.load_verify_file(options.tls_client_ca, ec)) return fail(options.tls_client_ca);
      t.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert, ec);
    }
  }
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
  tcp::acceptor& a = impl->acceptor;
  if (a.open(endpoint.protocol(), ec) || a.set_option(tcp::acceptor::reuse_address(true), ec) ||
      a.bind(endpoint, ec) || a.listen(asio::socket_base::max_listen_connections, ec)) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve the web view on ", options.listen, ": ", ec.message()));
  }
  impl->port = a.local_endpoint(ec).port();
  impl->accept_thread = std::thread(&Impl::AcceptLoop, impl.get());
  impl->reaper = std::thread(&Impl::ReapLoop, impl.get());
  return std::unique_ptr<WebServer>(new WebServer(std::move(impl)));
}

WebServer::WebServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WebServer::~WebServer() { impl_->Stop(); }

int WebServer::port() const { return impl_->port; }

bool WebServer::tls() const { return impl_->tls.has_value(); }

WebServerCounters WebServer::counters() const {
  return {impl_->requests.load(), impl_->refused.load(), impl_->bad.load(), impl_->timed_out.load(),
          impl_->evicted.load()};
}

}  // namespace stagefrontier
