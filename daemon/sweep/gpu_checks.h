// The node sweep's GPU checks, in a plugin (libsfsweep_cuda.so, built by nvcc where CUDA is
// installed: BUILD.bazel) so that the sweep itself never links CUDA and runs on any node:
// host-to-device and device-to-host copies (pinned memory), a BF16 GEMM through cuBLAS, and an
// all-reduce over every GPU of the node through NCCL. Where the plugin is missing or no GPU is
// visible, every GPU check says "skipped" with the reason — never "passed".
//
//   for (const SweepCheckResult& r : GpuChecks(scale)) ...
#ifndef STAGEFRONTIER_DAEMON_SWEEP_GPU_CHECKS_H_
#define STAGEFRONTIER_DAEMON_SWEEP_GPU_CHECKS_H_

#include <vector>

#include "daemon/sweep/host_checks.h"

// The plugin's C ABI (one symbol, sf_sweep_gpu_checks).
extern "C" {
struct SfSweepGpuResult {
  char name[32];
  char unit[16];
  double value;
  int state;  // 0 measured, 1 skipped, 2 failed
  char detail[256];
};
// Runs the GPU checks with work scaled by `scale`; fills at most `capacity` results and returns
// how many.
typedef int (*SfSweepGpuChecksFn)(double scale, SfSweepGpuResult* out, int capacity);
}

namespace stagefrontier {

// The names of the GPU checks, in order.
inline constexpr const char* kGpuCheckNames[] = {"gpu_h2d_gbps", "gpu_d2h_gbps", "gpu_gemm_tflops",
                                                 "nccl_allreduce_gbps"};

// Loads the plugin from the sweep's own directory (then the library path) and runs it; when it
// cannot be loaded, every GPU check is skipped with the loader's reason.
std::vector<SweepCheckResult> GpuChecks(double scale);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SWEEP_GPU_CHECKS_H_
