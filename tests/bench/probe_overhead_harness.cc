// The probe's cost per collective, measured where it is paid: the trainer's thread calling
// ncclAllReduce. Calls the ncclAllReduce the dynamic linker finds N times (the fake libnccl
// with FAKE_NCCL_SLEEP_US=0, so that the call itself costs almost nothing) and prints the
// mean and median nanoseconds per call. probe_overhead.sh runs it three ways: fake alone,
// probe forwarding only (STAGEFRONTIER_PROBE=0), probe timing every collective; the
// differences are the probe's cost.
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "client/probe/nccl_api.h"
#include "shm/monotonic_clock.h"

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 200000;
  auto all_reduce =
      reinterpret_cast<decltype(&ncclAllReduce)>(dlsym(RTLD_DEFAULT, "ncclAllReduce"));
  if (all_reduce == nullptr) {
    std::fprintf(stderr,
                 "probe_overhead_harness: no ncclAllReduce loaded (LD_PRELOAD a libnccl)\n");
    return 2;
  }
  float buf[16];
  // Batches of 100 calls, so that the clock read is not what is measured.
  std::vector<double> per_call;
  const int64_t start = stagefrontier::shm::MonotonicNowNs();
  for (int b = 0; b < n / 100; ++b) {
    const int64_t t0 = stagefrontier::shm::MonotonicNowNs();
    for (int i = 0; i < 100; ++i) all_reduce(buf, buf, 16, ncclFloat32, ncclSum, nullptr, nullptr);
    per_call.push_back(static_cast<double>(stagefrontier::shm::MonotonicNowNs() - t0) / 100.0);
  }
  const double total = static_cast<double>(stagefrontier::shm::MonotonicNowNs() - start);
  std::sort(per_call.begin(), per_call.end());
  std::printf("calls %d mean_ns %.1f median_ns %.1f p90_ns %.1f\n", n / 100 * 100,
              total / (n / 100 * 100), per_call[per_call.size() / 2],
              per_call[per_call.size() * 9 / 10]);
  return 0;
}
