// Measures the running pipeline (a documented harness, not a unit test): starts a real
// coordinator and a real sidecar, drives R in-process stub clients (one thread per rank,
// a std::barrier as the sync stage), and reports
//   latency:      from the last rank's end of a window's last step to the verdict arriving
//                 over gRPC (WatchVerdicts), p50 / p99 / max over every window;
//   sidecar CPU:  the sidecar's user+system CPU time over the run, as a share of one core.
// Usage:
//   pipeline_harness COORDINATOR_BIN SIDECAR_BIN [--ranks 8] [--step-ms 100] [--steps 300]
//                    [--window 10] [--port 17391]
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "grpcpp/grpcpp.h"
#include "stagefrontier/v1/query.grpc.pb.h"
#include "tests/bench/bench_processes.h"

namespace {

using namespace stagefrontier;
using bench::CpuSeconds;
using bench::Spawn;

void SleepMs(double ms) {
  std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s COORDINATOR_BIN SIDECAR_BIN [--ranks N] [--step-ms MS] "
                 "[--steps N] [--window N] [--port P]\n",
                 argv[0]);
    return 2;
  }
  int ranks = 8, steps = 300, window = 10, port = 17391;
  double step_ms = 100;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--ranks") ranks = std::atoi(argv[i + 1]);
    if (k == "--step-ms") step_ms = std::atof(argv[i + 1]);
    if (k == "--steps") steps = std::atoi(argv[i + 1]);
    if (k == "--window") window = std::atoi(argv[i + 1]);
    if (k == "--port") port = std::atoi(argv[i + 1]);
  }
  char tmpl[] = "/tmp/sf_harness_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string shm = dir + "/shm";
  mkdir(shm.c_str(), 0700);
  const std::string addr = "127.0.0.1:" + std::to_string(port);
  const pid_t coord = Spawn({argv[1], "--listen", addr, "--metrics-listen", "", "--data-dir",
                             dir + "/data", "--window-steps", std::to_string(window)},
                            dir + "/coordinator.log");
  // Start the sidecar and the ranks once the coordinator answers: this measures the running
  // pipeline, not start-up.
  {
    auto probe = v1::Query::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
    for (int i = 0; i < 200; ++i) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
      v1::ListJobsReply rep;
      if (probe->ListJobs(&ctx, v1::ListJobsRequest(), &rep).ok()) break;
      SleepMs(50);
    }
  }
  const pid_t sidecar = Spawn({argv[2], "--coordinator", addr, "--shm-dir", shm, "--node", "h"},
                              dir + "/sidecar.log");

  std::vector<std::unique_ptr<Client>> clients;
  for (int r = 0; r < ranks; ++r) {
    ClientOptions o;
    o.job_id = "harness";
    o.rank = r;
    o.local_rank = r;
    o.world_size = ranks;
    o.local_world_size = ranks;
    o.shm_dir = shm;
    auto c = Client::Create({{"data", StageKind::kIo},
                             {"forward", StageKind::kCompute},
                             {"backward", StageKind::kCompute},
                             {"grad_sync", StageKind::kSync},
                             {"optimizer", StageKind::kCompute}},
                            o, [](const char*) -> const char* { return nullptr; });
    if (!c.ok() || !(*c)->enabled()) {
      std::fprintf(
          stderr, "client %d: %s\n", r,
          c.ok() ? (*c)->disabled_reason().c_str() : std::string(c.status().message()).c_str());
      return 1;
    }
    clients.push_back(*std::move(c));
  }
  std::vector<std::vector<int64_t>> end_ns(steps, std::vector<int64_t>(ranks, 0));
  std::mutex mu;
  std::vector<double> latencies_ms;
  std::vector<double> startup_ms;
  std::atomic<bool> done{false};
  auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  grpc::ClientContext watch_ctx;
  std::thread watcher([&] {
    auto stub = v1::Query::NewStub(channel);
    while (!done) {
      grpc::ClientContext ctx;
      v1::GetHealthRequest req;
      req.set_job("harness");
      v1::GetHealthReply rep;
      if (stub->GetHealth(&ctx, req, &rep).ok()) break;
      SleepMs(20);
    }
    v1::WatchVerdictsRequest req;
    req.set_job("harness");
    auto reader = stub->WatchVerdicts(&watch_ctx, req);
    v1::VerdictEvent ev;
    while (reader->Read(&ev)) {
      const int64_t now = shm::MonotonicNowNs();
      const int64_t last = ev.verdict().last_step();
      // The first two windows include start-up (the sidecar finds a new segment on its next
      // directory scan, up to 1 s); they are reported apart.
      if (last < 0 || last >= steps) continue;
      if (last < 2 * window) {
        std::lock_guard<std::mutex> lock(mu);
        const int64_t ready = *std::max_element(end_ns[last].begin(), end_ns[last].end());
        startup_ms.push_back((now - ready) / 1e6);
        continue;
      }
      std::lock_guard<std::mutex> lock(mu);
      const int64_t ready = *std::max_element(end_ns[last].begin(), end_ns[last].end());
      latencies_ms.push_back((now - ready) / 1e6);
      if (std::getenv("SF_HARNESS_VERBOSE"))
        std::printf("window ending %lld: %.2f ms\n", static_cast<long long>(last),
                    (now - ready) / 1e6);
    }
  });
  const double cpu0 = CpuSeconds(sidecar);
  const auto t0 = std::chrono::steady_clock::now();
  std::barrier sync(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      Client& c = *clients[r];
      for (int s = 0; s < steps; ++s) {
        c.BeginStep(s);
        {
          auto sc = c.Scope(0);
          SleepMs(step_ms * 0.15);
        }
        {
          auto sc = c.Scope(1);
          SleepMs(step_ms * 0.30);
        }
        {
          auto sc = c.Scope(2);
          SleepMs(step_ms * 0.40);
        }
        {
          auto sc = c.Scope(3);
          sync.arrive_and_wait();
        }
        {
          auto sc = c.Scope(4);
          SleepMs(step_ms * 0.10);
        }
        c.EndStep();
        const int64_t t = shm::MonotonicNowNs();
        std::lock_guard<std::mutex> lock(mu);
        end_ns[s][r] = t;
      }
    });
  }
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu1 = CpuSeconds(sidecar);
  SleepMs(500);
  done = true;
  watch_ctx.TryCancel();
  watcher.join();
  kill(sidecar, SIGTERM);
  kill(coord, SIGTERM);
  waitpid(sidecar, nullptr, 0);
  waitpid(coord, nullptr, 0);
  std::sort(latencies_ms.begin(), latencies_ms.end());
  const auto pct = [&](double p) {
    return latencies_ms.empty()
               ? -1.0
               : latencies_ms[std::min(latencies_ms.size() - 1,
                                       static_cast<size_t>(p * latencies_ms.size()))];
  };
  std::printf("pipeline_harness: %d ranks, %d steps of %.0f ms, window %d, %.1f s\n", ranks, steps,
              step_ms, window, wall);
  std::printf(
      "verdict latency over %zu steady-state windows: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
      latencies_ms.size(), pct(0.50), pct(0.99), latencies_ms.empty() ? -1.0 : latencies_ms.back());
  for (double ms : startup_ms) std::printf("  (start-up window: %.2f ms, not counted)\n", ms);
  std::printf("sidecar CPU: %.3f s over %.1f s = %.3f%% of one core\n", cpu1 - cpu0, wall,
              100 * (cpu1 - cpu0) / wall);
  std::string rm = "rm -rf " + dir;
  return std::system(rm.c_str()) == 0 && !latencies_ms.empty() ? 0 : 1;
}
