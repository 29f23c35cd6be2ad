// The NCCL entry points of libsfprobe.so. Loaded before libnccl (LD_PRELOAD, or linked ahead
// of it), each one brackets the call with the tracker's events and forwards to the next
// definition of the same symbol (dlsym(RTLD_NEXT, ...)) with the same arguments, returning
// its result unchanged. A collective issued between ncclGroupStart and ncclGroupEnd is
// launched by ncclGroupEnd, so a group is one interval: its "before" event is recorded at
// the group's first collective and its "after" event after ncclGroupEnd returns.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>

#include "client/probe/collective_tracker.h"
#include "client/probe/nccl_api.h"
#include "client/probe/probe_runtime.h"
#include "shm/segment_layout_v2.h"

namespace {

namespace v2 = stagefrontier::shm::v2;
using stagefrontier::probe::CollectiveCall;
using stagefrontier::probe::CollectiveTracker;
using stagefrontier::probe::NcclTypeBytes;
using stagefrontier::probe::ProbeRuntime;

template <typename Fn>
Fn Next(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == nullptr) {
    std::fprintf(stderr,
                 "stagefrontier probe: %s is not defined by any library loaded after the probe "
                 "(load libnccl after libsfprobe)\n",
                 name);
  }
  return reinterpret_cast<Fn>(f);
}

// Group state of the calling thread: NCCL groups are per thread.
struct GroupState {
  int depth = 0;
  int64_t ticket = CollectiveTracker::kNotSampled;
  void* stream = nullptr;
  bool opened = false;
};
thread_local GroupState group;

uint64_t CommId(ncclComm_t comm) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(comm));
}

// Brackets one collective: `issue` performs the real call.
template <typename Issue>
ncclResult_t Track(uint16_t op, uint64_t bytes, ncclComm_t comm, cudaStream_t stream, Issue issue) {
  CollectiveTracker* tracker = ProbeRuntime::Tracker();
  if (tracker == nullptr) return issue();
  if (group.depth > 0) {
    // Inside a group: the first collective opens the group's interval on its stream.
    if (!group.opened) {
      group.opened = true;
      group.stream = stream;
      group.ticket = tracker->Begin(
          CollectiveCall{.op = op, .flags = v2::kProbeInGroup, .bytes = 0, .comm_id = CommId(comm)},
          stream);
    }
    tracker->AddToGroup(group.ticket, bytes);
    return issue();
  }
  const int64_t ticket = tracker->Begin(
      CollectiveCall{.op = op, .flags = 0, .bytes = bytes, .comm_id = CommId(comm)}, stream);
  const ncclResult_t r = issue();
  tracker->End(ticket, stream, r == ncclSuccess);
  return r;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) ncclResult_t ncclAllReduce(const void* sendbuff,
                                                                  void* recvbuff, size_t count,
                                                                  ncclDataType_t datatype,
                                                                  ncclRedOp_t op, ncclComm_t comm,
                                                                  cudaStream_t stream) {
  static auto next = Next<decltype(&ncclAllReduce)>("ncclAllReduce");
  if (next == nullptr) return ncclInternalError;
  return Track(v2::kOpAllReduce, count * NcclTypeBytes(datatype), comm, stream,
               [&] { return next(sendbuff, recvbuff, count, datatype, op, comm, stream); });
}

__attribute__((visibility("default"))) ncclResult_t ncclReduceScatter(
    const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
    ncclComm_t comm, cudaStream_t stream) {
  static auto next = Next<decltype(&ncclReduceScatter)>("ncclReduceScatter");
  if (next == nullptr) return ncclInternalError;
  return Track(v2::kOpReduceScatter, recvcount * NcclTypeBytes(datatype), comm, stream,
               [&] { return next(sendbuff, recvbuff, recvcount, datatype, op, comm, stream); });
}

__attribute__((visibility("default"))) ncclResult_t ncclAllGather(const void* sendbuff,
                                                                  void* recvbuff, size_t sendcount,
                                                                  ncclDataType_t datatype,
                                                                  ncclComm_t comm,
                                                                  cudaStream_t stream) {
  static auto next = Next<decltype(&ncclAllGather)>("ncclAllGather");
  if (next == nullptr) return ncclInternalError;
  return Track(v2::kOpAllGather, sendcount * NcclTypeBytes(datatype), comm, stream,
               [&] { return next(sendbuff, recvbuff, sendcount, datatype, comm, stream); });
}

__attribute__((visibility("default"))) ncclResult_t ncclBroadcast(const void* sendbuff,
                                                                  void* recvbuff, size_t count,
                                                                  ncclDataType_t datatype, int root,
                                                                  ncclComm_t comm,
                                                                  cudaStream_t stream) {
  static auto next = Next<decltype(&ncclBroadcast)>("ncclBroadcast");
  if (next == nullptr) return ncclInternalError;
  return Track(v2::kOpBroadcast, count * NcclTypeBytes(datatype), comm, stream,
               [&] { return next(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

__attribute__((visibility("default"))) ncclResult_t ncclReduce(
    const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
    int root, ncclComm_t comm, cudaStream_t stream) {
  static auto next = Next<decltype(&ncclReduce)>("ncclReduce");
  if (next == nullptr) return ncclInternalError;
  return Track(v2::kOpReduce, count * NcclTypeBytes(datatype), comm, stream,
               [&] { return next(sendbuff, recvbuff, count, datatype, op, root, comm, stream); });
}

__attribute__((visibility("default"))) ncclResult_t ncclSend(const void* sendbuff, size_t count,
                                                             ncclDataType_t datatype, int peer,
                                                             ncclComm_t comm, cudaStream_t stream) {
  static auto next = Next<decltype(&ncclSend)>("ncclSend");
  if (next == nullptr) return ncclInternalError;
  return Track(v2::kOpSend, count * NcclTypeBytes(datatype), comm, stream,
               [&] { return next(sendbuff, count, datatype, peer, comm, stream); });
}

__attribute__((visibility("default"))) ncclResult_t ncclRecv(void* recvbuff, size_t count,
                                                             ncclDataType_t datatype, int peer,
                                                             ncclComm_t comm, cudaStream_t stream) {
  static auto next = Next<decltype(&ncclRecv)>("ncclRecv");
  if (next == nullptr) return ncclInternalError;
  return Track(v2::kOpRecv, count * NcclTypeBytes(datatype), comm, stream,
               [&] { return next(recvbuff, count, datatype, peer, comm, stream); });
}

__attribute__((visibility("default"))) ncclResult_t ncclGroupStart() {
  static auto next = Next<decltype(&ncclGroupStart)>("ncclGroupStart");
  if (next == nullptr) return ncclInternalError;
  const ncclResult_t r = next();
  if (r == ncclSuccess && group.depth++ == 0) group = GroupState{.depth = 1};
  return r;
}

__attribute__((visibility("default"))) ncclResult_t ncclGroupEnd() {
  static auto next = Next<decltype(&ncclGroupEnd)>("ncclGroupEnd");
  if (next == nullptr) return ncclInternalError;
  const ncclResult_t r = next();
  if (group.depth > 0 && --group.depth == 0 && group.opened) {
    if (CollectiveTracker* tracker = ProbeRuntime::Tracker()) {
      tracker->End(group.ticket, group.stream, r == ncclSuccess);
    }
    group = GroupState{};
  }
  return r;
}

}  // extern "C"
