// The probe on a real GPU: one process, one GPU, an NCCL communicator of size one. A kernel
// keeps the stream busy before each all-reduce, so the collective starts well after it is
// called; run under LD_PRELOAD=libsfprobe.so (tests/probe/gpu_check.sh), the probe's CUDA
// backend must resolve one interval per all-reduce with start after call and end after
// start. Exits 77 (skipped) where no CUDA device is visible.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <thread>

__global__ void Spin(float* x, int n, int rounds) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  for (int r = 0; r < rounds; ++r) v = v * 0.999f + 0.001f;
  x[i] = v;
}

static const char kProgram[] = "gpu_check";
#include "tests/probe/gpu_program_checks.cuh"

int main() {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device visible (%s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  constexpr int kIters = 50;
  constexpr int kFloats = 16 << 20;  // 64 MiB
  int device = 0;
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitAll(&comm, 1, &device));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  float* buf = nullptr;
  CHECK_CUDA(cudaMalloc(&buf, kFloats * sizeof(float)));
  CHECK_CUDA(cudaMemset(buf, 0, kFloats * sizeof(float)));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) {
    Spin<<<(kFloats + 255) / 256, 256, 0, stream>>>(buf, kFloats, 64);
    CHECK_NCCL(ncclAllReduce(buf, buf, kFloats, ncclFloat32, ncclSum, comm, stream));
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the resolver's last poll
  std::printf("gpu_check: %d all-reduces of %d MiB after a spin kernel each, %.1f ms\n", kIters,
              static_cast<int>(kFloats * sizeof(float) >> 20), ms);
  ncclCommDestroy(comm);
  cudaFree(buf);
  return 0;
}
