#include "daemon/web/web_server.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
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

// Bounds every blocking read and write of a connection (Beast's sync calls have no timeout).
void SetTimeouts(int fd, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

}  // namespace

struct WebServer::Impl {
  WebServerOptions options;
  ApiHandler api;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::optional<asio::ssl::context> tls;
  int port = 0;
  std::thread accept_thread;

  mutable std::mutex mu;
  std::condition_variable idle;
  std::set<int> open_fds;  // of live connections, shut down by Stop
  bool stopping = false;
  std::atomic<uint64_t> requests{0}, refused{0}, bad{0};

  Reply Answer(const http::request<http::empty_body>& req) const;
  template <class Stream>
  void Converse(Stream& stream);
  void Serve(tcp::socket socket);
  void AcceptLoop();
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

template <class Stream>
void WebServer::Impl::Converse(Stream& stream) {
  boost::beast::flat_buffer buffer(16 << 10);
  for (;;) {
    http::request_parser<http::empty_body> parser;
    parser.header_limit(16 << 10);
    parser.body_limit(0);  // GET and HEAD carry no body
    boost::system::error_code ec;
    http::read(stream, buffer, parser, ec);
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
  SetTimeouts(fd, options.io_timeout_ms);
  if (tls.has_value()) {
    asio::ssl::stream<tcp::socket&> stream(socket, *tls);
    boost::system::error_code ec;
    stream.handshake(asio::ssl::stream_base::server, ec);
    if (ec) {
      ++bad;
    } else {
      Converse(stream);
      stream.shutdown(ec);
    }
  } else {
    Converse(socket);
  }
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  std::lock_guard<std::mutex> lock(mu);
  open_fds.erase(fd);
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
    if (static_cast<int>(open_fds.size()) >= options.max_connections) {
      lock.unlock();
      ++refused;
      static const char kBusy[] =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      if (!tls.has_value()) asio::write(socket, asio::buffer(kBusy, sizeof(kBusy) - 1), ec);
      continue;
    }
    open_fds.insert(socket.native_handle());
    std::thread(&Impl::Serve, this, std::move(socket)).detach();
  }
}

void WebServer::Impl::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
    // Wakes the blocked accept() and every blocked read: they return with an error.
    ::shutdown(acceptor.native_handle(), SHUT_RDWR);
    for (int fd : open_fds) ::shutdown(fd, SHUT_RDWR);
  }
  if (accept_thread.joinable()) accept_thread.join();
  std::unique_lock<std::mutex> lock(mu);
  idle.wait(lock, [&] { return open_fds.empty(); });
}

absl::StatusOr<std::unique_ptr<WebServer>> WebServer::Start(const WebServerOptions& options,
                                                            ApiHandler api) {
  const size_t colon = options.listen.rfind(':');
  int port = -1;
  std::string host = colon == std::string::npos ? "" : options.listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (colon == std::string::npos || ec ||
      !absl::SimpleAtoi(options.listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
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
  return std::unique_ptr<WebServer>(new WebServer(std::move(impl)));
}

WebServer::WebServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WebServer::~WebServer() { impl_->Stop(); }

int WebServer::port() const { return impl_->port; }

bool WebServer::tls() const { return impl_->tls.has_value(); }

WebServerCounters WebServer::counters() const {
  return {impl_->requests.load(), impl_->refused.load(), impl_->bad.load()};
}

}  // namespace stagefrontier
