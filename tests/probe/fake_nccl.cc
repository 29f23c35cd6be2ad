// A stand-in for libnccl that exports the entry points the probe interposes, with NCCL's C
// ABI. Each call is logged (function and every argument) so that a test can check that the
// probe forwarded it unchanged, sleeps FAKE_NCCL_SLEEP_US (default 300) microseconds so that
// the collective has a duration (0: no sleep), and returns the code set by
// fake_nccl_set_result.
// With FAKE_NCCL_BARRIER=<file>, ncclAllReduce is a real collective between processes: it
// waits at that process barrier (RANK of WORLD_SIZE parties) until every rank arrived, as a
// CPU all-reduce would; the end-to-end probe test runs trainers on it.
#include "tests/probe/fake_nccl.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "client/examples/process_barrier.h"
#include "client/probe/nccl_api.h"

namespace {

std::mutex mu;
std::vector<FakeNcclCall> calls;
int result = 0;

// The process barrier of FAKE_NCCL_BARRIER, opened on first use; null without it.
stagefrontier::ProcessBarrier* Barrier() {
  static stagefrontier::ProcessBarrier* barrier = [] {
    const char* path = std::getenv("FAKE_NCCL_BARRIER");
    const char* rank = std::getenv("RANK");
    const char* world = std::getenv("WORLD_SIZE");
    if (path == nullptr || rank == nullptr || world == nullptr)
      return (stagefrontier::ProcessBarrier*)nullptr;
    auto b = stagefrontier::ProcessBarrier::Open(path, std::atoi(rank), std::atoi(world));
    return b.ok() ? b->release() : nullptr;
  }();
  return barrier;
}

int SleepUs() {
  static const int us = [] {
    const char* s = std::getenv("FAKE_NCCL_SLEEP_US");
    return s ? std::atoi(s) : 300;
  }();
  return us;
}

// FAKE_NCCL_NO_LOG=1: calls are not logged (benchmarks make millions of them).
bool Logging() {
  static const bool on = std::getenv("FAKE_NCCL_NO_LOG") == nullptr;
  return on;
}

ncclResult_t Log(const char* fn, const void* send, const void* recv, size_t count, int datatype,
                 int op, int root_or_peer, ncclComm_t comm, cudaStream_t stream) {
  FakeNcclCall c{};
  std::strncpy(c.function, fn, sizeof(c.function) - 1);
  c.sendbuff = send;
  c.recvbuff = recv;
  c.count = count;
  c.datatype = datatype;
  c.op = op;
  c.root_or_peer = root_or_peer;
  c.comm = comm;
  c.stream = stream;
  if (std::strcmp(fn, "ncclAllReduce") == 0 && Barrier() != nullptr) {
    Barrier()->Wait();
    return static_cast<ncclResult_t>(result);  // long runs: not logged
  }
  if (SleepUs() > 0 && std::strcmp(fn, "ncclGroupStart") != 0 &&
      std::strcmp(fn, "ncclGroupEnd") != 0) {
    usleep(static_cast<useconds_t>(SleepUs()));
  }
  if (!Logging()) return static_cast<ncclResult_t>(result);
  std::lock_guard<std::mutex> lock(mu);
  calls.push_back(c);
  return static_cast<ncclResult_t>(result);
}

}  // namespace

extern "C" {

void fake_nccl_set_result(int r) {
  std::lock_guard<std::mutex> lock(mu);
  result = r;
}

size_t fake_nccl_calls(FakeNcclCall* out, size_t max) {
  std::lock_guard<std::mutex> lock(mu);
  const size_t n = calls.size() < max ? calls.size() : max;
  for (size_t i = 0; i < n; ++i) out[i] = calls[i];
  return calls.size();
}

ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t c, cudaStream_t st) {
  return Log("ncclAllReduce", s, r, n, t, op, -1, c, st);
}
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t st) {
  return Log("ncclReduceScatter", s, r, n, t, op, -1, c, st);
}
ncclResult_t ncclAllGather(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t st) {
  return Log("ncclAllGather", s, r, n, t, -1, -1, c, st);
}
ncclResult_t ncclBroadcast(const void* s, void* r, size_t n, ncclDataType_t t, int root,
                           ncclComm_t c, cudaStream_t st) {
  return Log("ncclBroadcast", s, r, n, t, -1, root, c, st);
}
ncclResult_t ncclReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                        int root, ncclComm_t c, cudaStream_t st) {
  return Log("ncclReduce", s, r, n, t, op, root, c, st);
}
ncclResult_t ncclSend(const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t st) {
  return Log("ncclSend", s, nullptr, n, t, -1, peer, c, st);
}
ncclResult_t ncclRecv(void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t st) {
  return Log("ncclRecv", nullptr, r, n, t, -1, peer, c, st);
}
ncclResult_t ncclGroupStart() {
  return Log("ncclGroupStart", nullptr, nullptr, 0, -1, -1, -1, nullptr, nullptr);
}
ncclResult_t ncclGroupEnd() {
  return Log("ncclGroupEnd", nullptr, nullptr, 0, -1, -1, -1, nullptr, nullptr);
}

}  // extern "C"
