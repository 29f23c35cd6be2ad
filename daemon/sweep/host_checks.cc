#include "daemon/sweep/host_checks.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stagefrontier {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

SweepCheckResult Measured(std::string name, std::string unit, double value, std::string detail) {
  return {std::move(name), std::move(unit), value, "measured", std::move(detail)};
}

SweepCheckResult Failed(std::string name, std::string unit, std::string why) {
  return {std::move(name), std::move(unit), 0, "failed", std::move(why)};
}

std::string Errno(const char* what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

}  // namespace

SweepCheckResult CpuCheck(double scale) {
  // Eight independent multiply-add chains, so the core's FMA units stay busy; the result is
  // used so the compiler cannot drop the loop.
  const int64_t iterations = std::max<int64_t>(1, static_cast<int64_t>(2e8 * scale));
  double a[8] = {1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7};
  const double m = 0.999999, c = 1e-7;
  const auto start = Clock::now();
  for (int64_t i = 0; i < iterations; ++i) {
    for (double& x : a) x = x * m + c;
  }
  const double s = Seconds(start);
  double sum = 0;
  for (double x : a) sum += x;
  const double gflops = 2.0 * 8 * static_cast<double>(iterations) / s / 1e9;
  return Measured(
      "cpu_gflops", "GFLOP/s", gflops,
      absl::StrFormat("%d multiply-adds x 8 chains in %.3f s (checksum %.3f)", iterations, s, sum));
}

SweepCheckResult MemoryBandwidthCheck(double scale) {
  // STREAM triad a = b + q*c over arrays far larger than any cache: 3 x 8 B moved per element.
  // 128 MiB per array (32 MiB for a quick sweep): far beyond the caches.
  const size_t n = scale >= 1 ? size_t{16} << 20 : size_t{4} << 20;
  const int passes = std::max(2, static_cast<int>(10 * scale));
  std::unique_ptr<double[]> a(new (std::nothrow) double[n]);
  std::unique_ptr<double[]> b(new (std::nothrow) double[n]);
  std::unique_ptr<double[]> c(new (std::nothrow) double[n]);
  if (!a || !b || !c) {
    return Failed("memory_gbps", "GB/s",
                  absl::StrCat("cannot allocate 3 x ", (n * sizeof(double)) >> 20, " MiB"));
  }
  for (size_t i = 0; i < n; ++i) {
    a[i] = 0;
    b[i] = 1;
    c[i] = 2;
  }
  const double q = 3;
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    const auto start = Clock::now();
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + q * c[i];
    best = std::max(best, 3.0 * 8 * static_cast<double>(n) / Seconds(start) / 1e9);
  }
  return Measured("memory_gbps", "GB/s", best,
                  absl::StrFormat("STREAM triad, 3 x %d MiB, best of %d passes (a[7] = %.0f)",
                                  (n * sizeof(double)) >> 20, passes, a[7]));
}

SweepCheckResult DiskReadCheck(const std::string& dir, double scale) {
  const std::string name = "disk_read_mbps", unit = "MB/s";
  const size_t bytes =
      std::max<size_t>(8 << 20, static_cast<size_t>(512e6 * scale)) & ~size_t{4095};
  std::string path = dir + "/stagefrontier-sweep-XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) return Failed(name, unit, Errno(("cannot create a file in " + dir).c_str()));
  unlink(path.c_str());  // nothing is left behind, even if the sweep is killed
  std::vector<char> buf(1 << 20);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>(i * 131);
  for (size_t done = 0; done < bytes; done += buf.size()) {
    const ssize_t w = write(fd, buf.data(), std::min(buf.size(), bytes - done));
    if (w <= 0) {
      const std::string why = Errno("write");
      close(fd);
      return Failed(name, unit, absl::StrCat(why, " (", dir, ": is there space?)"));
    }
  }
  // Make the data durable, then drop it from the page cache so that the read hits the disk.
  if (fsync(fd) != 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) {
    const std::string why = Errno("fsync/fadvise");
    close(fd);
    return Failed(name, unit, why);
  }
  const auto start = Clock::now();
  size_t got = 0;
  while (true) {
    const ssize_t r = pread(fd, buf.data(), buf.size(), static_cast<off_t>(got));
    if (r < 0) {
      const std::string why = Errno("read");
      close(fd);
      return Failed(name, unit, why);
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  const double s = Seconds(start);
  close(fd);
  if (got != bytes) return Failed(name, unit, absl::StrCat("read ", got, " of ", bytes, " bytes"));
  return Measured(name, unit, static_cast<double>(got) / s / 1e6,
                  absl::StrFormat("%d MiB written, evicted from the page cache, read back from %s "
                                  "(a tmpfs reads from memory)",
                                  bytes >> 20, dir));
}

SweepCheckResult LoopbackCheck(double scale) {
  const std::string name = "loopback_gbps", unit = "GB/s";
  const size_t bytes = std::max<size_t>(16 << 20, static_cast<size_t>(2e9 * scale));
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) return Failed(name, unit, Errno("socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = Errno("loopback listen");
    close(listener);
    return Failed(name, unit, why);
  }
  const int sender = socket(AF_INET, SOCK_STREAM, 0);
  if (sender < 0 || connect(sender, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const std::string why = Errno("loopback connect");
    if (sender >= 0) close(sender);
    close(listener);
    return Failed(name, unit, why);
  }
  const int receiver = accept(listener, nullptr, nullptr);
  close(listener);
  if (receiver < 0) {
    const std::string why = Errno("accept");
    close(sender);
    return Failed(name, unit, why);
  }
  const auto start = Clock::now();
  std::thread writer([&] {
    std::vector<char> buf(1 << 20, 'x');
    for (size_t sent = 0; sent < bytes;) {
      const ssize_t w = send(sender, buf.data(), std::min(buf.size(), bytes - sent), MSG_NOSIGNAL);
      if (w <= 0) break;
      sent += static_cast<size_t>(w);
    }
    shutdown(sender, SHUT_WR);
  });
  std::vector<char> buf(1 << 20);
  size_t got = 0;
  while (true) {
    const ssize_t r = recv(receiver, buf.data(), buf.size(), 0);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  writer.join();
  const double s = Seconds(start);
  close(sender);
  close(receiver);
  if (got != bytes) return Failed(name, unit, absl::StrCat("received ", got, " of ", bytes));
  return Measured(name, unit, static_cast<double>(got) / s / 1e9,
                  absl::StrFormat("%d MiB through one loopback TCP connection", bytes >> 20));
}

}  // namespace stagefrontier
