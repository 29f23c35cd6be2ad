// The sidecar's channel reaches a coordinator whose handshake is slow with one connection
// attempt, and one that comes back after refusing connections at once. Regression: the
// connect timeout used to be the 100 ms retry delay, so on a loaded machine every attempt
// was cut off before the server's HTTP/2 SETTINGS arrived and a sidecar took seconds (CI:
// 6 s) to connect, while its ranks' steps closed partial; a long timeout alone made gRPC wait
// as long between attempts (a restarted coordinator found only 20 s later).
#include "daemon/sidecar/coordinator_channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "daemon/coordinator/health_service.h"

namespace stagefrontier {
namespace {

int ListenLoopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(listen(fd, 16) == 0);
  socklen_t len = sizeof a;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  *port = ntohs(a.sin_port);
  return fd;
}

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A server needs one service to start; the coordinator's health service will do.
std::unique_ptr<grpc::Server> StartServer(const std::string& address, int* port) {
  static HealthService health;
  grpc::ServerBuilder builder;
  builder.RegisterService(&health);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  return builder.BuildAndStart();
}

// Accepts TCP connections, holds each for `delay` before forwarding it to the backend, and
// counts how many connections the client opened.
class SlowHandshakeProxy {
 public:
  SlowHandshakeProxy(int backend_port, std::chrono::milliseconds delay)
      : backend_port_(backend_port), delay_(delay) {
    listen_fd_ = ListenLoopback(&port_);
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~SlowHandshakeProxy() {
    stop_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    acceptor_.join();
    for (auto& t : pumps_) t.join();
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  void Accept() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int client = accept(listen_fd_, nullptr, nullptr);
      if (client < 0) continue;
      ++accepted_;
      pumps_.emplace_back([this, client] { Pump(client); });
    }
  }
  void Pump(int client) {
    const auto until = std::chrono::steady_clock::now() + delay_;
    while (!stop_ && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const int server = ConnectLoopback(backend_port_);
    char buf[16384];
    while (!stop_ && server >= 0) {
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (poll(p, 2, 50) <= 0) continue;
      bool closed = false;
      for (int i = 0; i < 2 && !closed; ++i) {
        if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const ssize_t n = read(p[i].fd, buf, sizeof buf);
        closed = n <= 0 || write(p[1 - i].fd, buf, static_cast<size_t>(n)) != n;
      }
      if (closed) break;
    }
    if (server >= 0) close(server);
    close(client);
  }

  int backend_port_;
  std::chrono::milliseconds delay_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  std::vector<std::thread> pumps_;  // only the acceptor thread adds; joined after it
};

TEST_CASE("a slow coordinator handshake is waited for, not retried") {
  int backend_port = 0;
  std::unique_ptr<grpc::Server> server = StartServer("127.0.0.1:0", &backend_port);
  REQUIRE(backend_port > 0);
  {
    // 600 ms: six times the retry delay, far below the connect timeout.
    SlowHandshakeProxy proxy(backend_port, std::chrono::milliseconds(600));
    CoordinatorChannelOptions options;
    options.target = "127.0.0.1:" + std::to_string(proxy.port());
    CoordinatorConnection connection(options, grpc::InsecureChannelCredentials());
    auto channel = connection.Channel();
    REQUIRE(channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(15)));
    CHECK(proxy.accepted() == 1);
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

TEST_CASE("a coordinator that comes back is found on the caller's next try, not gRPC's") {
  int port = 0;
  const int fd = ListenLoopback(&port);
  close(fd);  // the port is now free: connections are refused at once
  CoordinatorChannelOptions options;
  options.target = "127.0.0.1:" + std::to_string(port);
  CoordinatorConnection connection(options, grpc::InsecureChannelCredentials());
  // A refused connection does not wait out the connect timeout.
  std::shared_ptr<grpc::Channel> first = connection.Channel();
  CHECK_FALSE(first->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5)));
  CHECK(first->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE);

  int bound = 0;
  std::unique_ptr<grpc::Server> server = StartServer(options.target, &bound);
  REQUIRE(bound == port);
  // gRPC would retry the failed channel only after the 20 s connect timeout (its minimum
  // between attempts); the next channel the connection hands out tries at once.
  std::shared_ptr<grpc::Channel> next = connection.Channel();
  CHECK(next != first);
  CHECK(connection.channels_made() == 2);
  CHECK(next->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5)));
  // A connected channel is kept.
  CHECK(connection.Channel() == next);
  CHECK(connection.channels_made() == 2);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace
}  // namespace stagefrontier
