// The GPU checks plugin (gpu_checks.h), compiled by nvcc into libsfsweep_cuda.so and linked
// against cudart, cuBLAS and NCCL. Every failure becomes a "failed" result with CUDA's message;
// no device becomes "skipped".
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "daemon/sweep/gpu_checks.h"

namespace {

void Set(SfSweepGpuResult* r, const char* name, const char* unit, double value, int state,
         const char* detail) {
  std::snprintf(r->name, sizeof r->name, "%s", name);
  std::snprintf(r->unit, sizeof r->unit, "%s", unit);
  r->value = value;
  r->state = state;
  std::snprintf(r->detail, sizeof r->detail, "%s", detail);
}

// Milliseconds `work` takes on device 0's default stream, timed with events.
template <typename F>
bool TimeMs(F work, float* ms, char* error, size_t error_len) {
  cudaEvent_t a = nullptr, b = nullptr;
  cudaError_t e = cudaEventCreate(&a);
  if (e == cudaSuccess) e = cudaEventCreate(&b);
  if (e == cudaSuccess) e = cudaEventRecord(a);
  if (e == cudaSuccess) e = work();
  if (e == cudaSuccess) e = cudaEventRecord(b);
  if (e == cudaSuccess) e = cudaEventSynchronize(b);
  if (e == cudaSuccess) e = cudaEventElapsedTime(ms, a, b);
  if (a != nullptr) cudaEventDestroy(a);
  if (b != nullptr) cudaEventDestroy(b);
  if (e != cudaSuccess) std::snprintf(error, error_len, "%s", cudaGetErrorString(e));
  return e == cudaSuccess;
}

void Copies(double scale, SfSweepGpuResult* h2d, SfSweepGpuResult* d2h) {
  const size_t bytes = std::max<size_t>(16 << 20, static_cast<size_t>(1e9 * scale));
  void* host = nullptr;
  void* dev = nullptr;
  char err[200] = "";
  cudaError_t e = cudaMallocHost(&host, bytes);
  if (e == cudaSuccess) e = cudaMalloc(&dev, bytes);
  if (e != cudaSuccess) {
    std::snprintf(err, sizeof err, "allocating %zu MiB: %s", bytes >> 20, cudaGetErrorString(e));
    Set(h2d, "gpu_h2d_gbps", "GB/s", 0, 2, err);
    Set(d2h, "gpu_d2h_gbps", "GB/s", 0, 2, err);
  } else {
    std::memset(host, 1, bytes);
    float ms = 0;
    char detail[256];
    std::snprintf(detail, sizeof detail, "%zu MiB pinned, device 0", bytes >> 20);
    if (TimeMs([&] { return cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice); }, &ms, err,
               sizeof err)) {
      Set(h2d, "gpu_h2d_gbps", "GB/s", bytes / (ms * 1e-3) / 1e9, 0, detail);
    } else {
      Set(h2d, "gpu_h2d_gbps", "GB/s", 0, 2, err);
    }
    if (TimeMs([&] { return cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost); }, &ms, err,
               sizeof err)) {
      Set(d2h, "gpu_d2h_gbps", "GB/s", bytes / (ms * 1e-3) / 1e9, 0, detail);
    } else {
      Set(d2h, "gpu_d2h_gbps", "GB/s", 0, 2, err);
    }
  }
  if (dev != nullptr) cudaFree(dev);
  if (host != nullptr) cudaFreeHost(host);
}

void Gemm(double scale, SfSweepGpuResult* out) {
  const int n = 8192;
  const int iterations = std::max(2, static_cast<int>(20 * scale));
  const size_t elems = size_t{n} * n;
  __nv_bfloat16 *a = nullptr, *b = nullptr, *c = nullptr;
  cublasHandle_t handle = nullptr;
  char err[200] = "";
  cudaError_t e = cudaMalloc(&a, elems * sizeof *a);
  if (e == cudaSuccess) e = cudaMalloc(&b, elems * sizeof *b);
  if (e == cudaSuccess) e = cudaMalloc(&c, elems * sizeof *c);
  if (e == cudaSuccess) e = cudaMemset(a, 0, elems * sizeof *a);
  if (e == cudaSuccess) e = cudaMemset(b, 0, elems * sizeof *b);
  if (e != cudaSuccess) {
    std::snprintf(err, sizeof err, "allocating 3 x %d^2 BF16: %s", n, cudaGetErrorString(e));
    Set(out, "gpu_gemm_tflops", "TFLOP/s", 0, 2, err);
  } else if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    Set(out, "gpu_gemm_tflops", "TFLOP/s", 0, 2, "cublasCreate failed");
  } else {
    const float alpha = 1, beta = 0;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    auto gemm = [&] {
      for (int i = 0; i < iterations && st == CUBLAS_STATUS_SUCCESS; ++i) {
        st = cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, CUDA_R_16BF, n, b,
                          CUDA_R_16BF, n, &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT);
      }
      return st == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown;
    };
    float ms = 0;
    gemm();  // warm-up: cuBLAS picks its kernel
    if (TimeMs(gemm, &ms, err, sizeof err)) {
      char detail[256];
      std::snprintf(detail, sizeof detail, "%d x BF16 GEMM %d^3 (FP32 accumulate), device 0",
                    iterations, n);
      Set(out, "gpu_gemm_tflops", "TFLOP/s", 2.0 * n * n * n * iterations / (ms * 1e-3) / 1e12, 0,
          detail);
    } else {
      std::snprintf(err, sizeof err, "cublasGemmEx status %d", static_cast<int>(st));
      Set(out, "gpu_gemm_tflops", "TFLOP/s", 0, 2, err);
    }
  }
  if (handle != nullptr) cublasDestroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

void AllReduce(int devices, double scale, SfSweepGpuResult* out) {
  const size_t count = std::max<size_t>(1 << 20, static_cast<size_t>(128e6 * scale));  // floats
  std::vector<ncclComm_t> comms(devices);
  std::vector<float*> bufs(devices, nullptr);
  std::vector<cudaStream_t> streams(devices, nullptr);
  char err[256] = "";
  ncclResult_t r = ncclCommInitAll(comms.data(), devices, nullptr);
  if (r != ncclSuccess) {
    std::snprintf(err, sizeof err, "ncclCommInitAll: %s", ncclGetErrorString(r));
    Set(out, "nccl_allreduce_gbps", "GB/s", 0, 2, err);
    return;
  }
  cudaError_t e = cudaSuccess;
  for (int d = 0; d < devices && e == cudaSuccess; ++d) {
    e = cudaSetDevice(d);
    if (e == cudaSuccess) e = cudaMalloc(&bufs[d], count * sizeof(float));
    if (e == cudaSuccess) e = cudaMemset(bufs[d], 0, count * sizeof(float));
    if (e == cudaSuccess) e = cudaStreamCreate(&streams[d]);
  }
  auto run = [&](int iterations) {
    for (int i = 0; i < iterations && r == ncclSuccess; ++i) {
      r = ncclGroupStart();
      for (int d = 0; d < devices && r == ncclSuccess; ++d) {
        r = ncclAllReduce(bufs[d], bufs[d], count, ncclFloat, ncclSum, comms[d], streams[d]);
      }
      if (r == ncclSuccess) r = ncclGroupEnd();
    }
    for (int d = 0; d < devices; ++d) {
      cudaSetDevice(d);
      cudaStreamSynchronize(streams[d]);
    }
  };
  if (e != cudaSuccess) {
    std::snprintf(err, sizeof err, "setting up %d devices: %s", devices, cudaGetErrorString(e));
    Set(out, "nccl_allreduce_gbps", "GB/s", 0, 2, err);
  } else {
    const int iterations = std::max(2, static_cast<int>(20 * scale));
    run(2);  // warm-up
    cudaEvent_t start = nullptr, stop = nullptr;
    cudaSetDevice(0);
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, streams[0]);
    run(iterations);
    cudaSetDevice(0);
    cudaEventRecord(stop, streams[0]);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (r != ncclSuccess) {
      std::snprintf(err, sizeof err, "ncclAllReduce: %s", ncclGetErrorString(r));
      Set(out, "nccl_allreduce_gbps", "GB/s", 0, 2, err);
    } else {
      // Bus bandwidth (nccl-tests' convention): algorithm bandwidth x 2(n-1)/n.
      const double bytes = static_cast<double>(count) * sizeof(float);
      const double algbw = bytes * iterations / (ms * 1e-3) / 1e9;
      const double busbw = algbw * 2.0 * (devices - 1) / devices;
      char detail[256];
      std::snprintf(detail, sizeof detail, "%d GPUs, %d all-reduces of %zu MiB (bus bandwidth)",
                    devices, iterations, (count * sizeof(float)) >> 20);
      Set(out, "nccl_allreduce_gbps", "GB/s", busbw, 0, detail);
    }
  }
  for (int d = 0; d < devices; ++d) {
    cudaSetDevice(d);
    if (bufs[d] != nullptr) cudaFree(bufs[d]);
    if (streams[d] != nullptr) cudaStreamDestroy(streams[d]);
    ncclCommDestroy(comms[d]);
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int sf_sweep_gpu_checks(double scale,
                                                                          SfSweepGpuResult* out,
                                                                          int capacity) {
  if (capacity < 4) return 0;
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    char why[200];
    std::snprintf(why, sizeof why, "no CUDA device (%s)",
                  e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    Set(&out[0], "gpu_h2d_gbps", "GB/s", 0, 1, why);
    Set(&out[1], "gpu_d2h_gbps", "GB/s", 0, 1, why);
    Set(&out[2], "gpu_gemm_tflops", "TFLOP/s", 0, 1, why);
    Set(&out[3], "nccl_allreduce_gbps", "GB/s", 0, 1, why);
    return 4;
  }
  cudaSetDevice(0);
  Copies(scale, &out[0], &out[1]);
  Gemm(scale, &out[2]);
  if (devices > 1) {
    AllReduce(devices, scale, &out[3]);
  } else {
    // One GPU: NCCL's all-reduce copies in place (an H200 "measured" 1.4 PB/s), no link is used.
    Set(&out[3], "nccl_allreduce_gbps", "GB/s", 0, 1,
        "one GPU on this node: an all-reduce uses no link (NCCL copies in place)");
  }
  return 4;
}
