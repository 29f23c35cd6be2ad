// The probe's cost on a real GPU and a real NCCL (docs/results.md), where probe_overhead_harness
// measures it against the fake libnccl: one process, one GPU, an NCCL communicator of size one.
//   calls N small all-reduces (the launch is what the trainer's thread pays: the host cost);
//   then N all-reduces of BYTES after a short kernel each and the wall time to the stream's end
//   (what the GPU pays: the probe's two cudaEventRecord calls sit on the stream).
// probe_gpu_overhead.sh runs it without the probe, with the probe forwarding only, with the
// host-clock backend and with the CUDA-event backend; the differences are the probe's cost.
//   probe_gpu_overhead [N] [BYTES]
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

__global__ void Touch(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 0.5f + 1.0f;
}

static const char kProgram[] = "probe_gpu_overhead";
#include "tests/probe/gpu_program_checks.cuh"

static double NowNs() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 20000;
  const long bytes = argc > 2 ? std::atol(argv[2]) : (4L << 20);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device visible\n");
    return 77;
  }
  int device = 0;
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitAll(&comm, 1, &device));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  const int floats = static_cast<int>(bytes / sizeof(float));
  float* buf = nullptr;
  CHECK_CUDA(cudaMalloc(&buf, floats * sizeof(float)));
  CHECK_CUDA(cudaMemset(buf, 0, floats * sizeof(float)));
  // Warm-up: NCCL's first calls set up its kernels and buffers.
  for (int i = 0; i < 200; ++i)
    CHECK_NCCL(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));

  // 1. Host cost: batches of 100 small all-reduces, the stream drained between batches so
  //    that the launch queue never fills and blocks the caller.
  std::vector<double> per_call;
  double host_total = 0;
  for (int b = 0; b < n / 100; ++b) {
    const double t0 = NowNs();
    for (int i = 0; i < 100; ++i)
      CHECK_NCCL(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, stream));
    const double dt = NowNs() - t0;
    host_total += dt;
    per_call.push_back(dt / 100.0);
    CHECK_CUDA(cudaStreamSynchronize(stream));
  }
  std::sort(per_call.begin(), per_call.end());
  const int calls = n / 100 * 100;
  std::printf("host: calls %d mean_ns %.1f median_ns %.1f p90_ns %.1f\n", calls, host_total / calls,
              per_call[per_call.size() / 2], per_call[per_call.size() * 9 / 10]);

  // 2. GPU cost: a kernel then an all-reduce of `bytes`, n/10 times, timed to the stream's end.
  const int big = std::max(1, n / 10);
  const double t0 = NowNs();
  for (int i = 0; i < big; ++i) {
    Touch<<<(floats + 255) / 256, 256, 0, stream>>>(buf, floats);
    CHECK_NCCL(ncclAllReduce(buf, buf, floats, ncclFloat32, ncclSum, comm, stream));
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  const double gpu_ms = (NowNs() - t0) / 1e6;
  std::printf("gpu: steps %d bytes %ld total_ms %.2f per_step_us %.2f\n", big, bytes, gpu_ms,
              gpu_ms * 1000.0 / big);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the resolver's last polls
  ncclCommDestroy(comm);
  cudaFree(buf);
  return 0;
}
