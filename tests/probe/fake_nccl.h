// The test hooks of the fake libnccl (fake_nccl.cc): what each call received.
#ifndef STAGEFRONTIER_TESTS_PROBE_FAKE_NCCL_H_
#define STAGEFRONTIER_TESTS_PROBE_FAKE_NCCL_H_

#include <cstddef>

#include "client/probe/nccl_api.h"

extern "C" {
struct FakeNcclCall {
  char function[32];
  const void* sendbuff;
  const void* recvbuff;
  size_t count;
  int datatype;
  int op;            // reduction op, -1 where the call has none
  int root_or_peer;  // root or peer, -1 where the call has none
  ncclComm_t comm;
  cudaStream_t stream;
};
// Sets the code every later call returns.
void fake_nccl_set_result(int result);
// Copies up to `max` logged calls into `out`; returns how many were logged in all.
size_t fake_nccl_calls(FakeNcclCall* out, size_t max);
}

#endif  // STAGEFRONTIER_TESTS_PROBE_FAKE_NCCL_H_
