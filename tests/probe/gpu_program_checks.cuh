// CHECK_CUDA and CHECK_NCCL for the GPU test programs (gpu_check.cu, probe_gpu_overhead.cu):
// on failure they print "<kProgram>: <call>: <error>" to stderr and return 1 from the calling
// function (their main). Each program defines kProgram before including this header.
//
//   static const char kProgram[] = "gpu_check";
//   #include "tests/probe/gpu_program_checks.cuh"
//   CHECK_CUDA(cudaStreamCreate(&stream));
#ifndef STAGEFRONTIER_TESTS_PROBE_GPU_PROGRAM_CHECKS_CUH_
#define STAGEFRONTIER_TESTS_PROBE_GPU_PROGRAM_CHECKS_CUH_

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>

#define CHECK_CUDA(x)                                                               \
  do {                                                                              \
    cudaError_t e = (x);                                                            \
    if (e != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s: %s: %s\n", kProgram, #x, cudaGetErrorString(e));    \
      return 1;                                                                     \
    }                                                                               \
  } while (0)
#define CHECK_NCCL(x)                                                               \
  do {                                                                              \
    ncclResult_t r = (x);                                                           \
    if (r != ncclSuccess) {                                                         \
      std::fprintf(stderr, "%s: %s: %s\n", kProgram, #x, ncclGetErrorString(r));    \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

#endif  // STAGEFRONTIER_TESTS_PROBE_GPU_PROGRAM_CHECKS_CUH_
