// Run with LD_PRELOAD="libsfprobe.so libfake_nccl.so" (interpose_test.sh): calls every NCCL
// entry point through the dynamic linker, as a trainer would, and checks that
//   * the symbol the linker finds is the probe's,
//   * the fake libnccl received exactly the arguments given, and its return code came back,
//   * the probe ring holds one interval per successful collective (one per group), in call
//     order, with the right operation, byte count, communicator and sequence number, and
//     times call <= start <= end covering the fake's sleep.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "shm/monotonic_clock.h"
#include "shm/probe_ring_reader.h"
#include "shm/segment_file.h"
#include "tests/probe/fake_nccl.h"

namespace {

int failures = 0;
#define EXPECT(cond)                                                 \
  do {                                                               \
    if (!(cond)) {                                                   \
      std::fprintf(stderr, "FAILED line %d: %s\n", __LINE__, #cond); \
      ++failures;                                                    \
    }                                                                \
  } while (0)

template <typename Fn>
Fn Find(const char* name) {
  void* f = dlsym(RTLD_DEFAULT, name);
  Dl_info info{};
  const bool from_probe = f != nullptr && dladdr(f, &info) != 0 && info.dli_fname != nullptr &&
                          std::strstr(info.dli_fname, "libsfprobe.so") != nullptr;
  if (!from_probe) {
    std::fprintf(stderr, "FAILED: %s resolves to %s, not to libsfprobe.so\n", name,
                 f ? info.dli_fname : "nothing");
    ++failures;
  }
  return reinterpret_cast<Fn>(f);
}

}  // namespace

int main() {
  using namespace stagefrontier;
  auto all_reduce = Find<decltype(&ncclAllReduce)>("ncclAllReduce");
  auto reduce_scatter = Find<decltype(&ncclReduceScatter)>("ncclReduceScatter");
  auto all_gather = Find<decltype(&ncclAllGather)>("ncclAllGather");
  auto broadcast = Find<decltype(&ncclBroadcast)>("ncclBroadcast");
  auto reduce = Find<decltype(&ncclReduce)>("ncclReduce");
  auto send = Find<decltype(&ncclSend)>("ncclSend");
  auto recv = Find<decltype(&ncclRecv)>("ncclRecv");
  auto group_start = Find<decltype(&ncclGroupStart)>("ncclGroupStart");
  auto group_end = Find<decltype(&ncclGroupEnd)>("ncclGroupEnd");
  auto set_result = reinterpret_cast<decltype(&fake_nccl_set_result)>(
      dlsym(RTLD_DEFAULT, "fake_nccl_set_result"));
  auto logged =
      reinterpret_cast<decltype(&fake_nccl_calls)>(dlsym(RTLD_DEFAULT, "fake_nccl_calls"));
  if (failures > 0 || set_result == nullptr || logged == nullptr) {
    std::fprintf(stderr, "FAILED: the probe or the fake libnccl is not loaded\n");
    return 1;
  }

  char buf[64];
  auto* comm = reinterpret_cast<ncclComm_t>(0xC0FFEE0);
  auto* other_comm = reinterpret_cast<ncclComm_t>(0xBEEF00);
  auto* stream = reinterpret_cast<cudaStream_t>(0x5151);
  const int64_t t0 = shm::MonotonicNowNs();
  EXPECT(all_reduce(buf, buf + 1, 1000, ncclFloat32, static_cast<ncclRedOp_t>(2), comm, stream) ==
         ncclSuccess);
  EXPECT(reduce_scatter(buf + 2, buf + 3, 10, ncclFloat16, ncclSum, comm, stream) == ncclSuccess);
  EXPECT(all_gather(buf + 4, buf + 5, 7, ncclInt64, comm, stream) == ncclSuccess);
  EXPECT(broadcast(buf + 6, buf + 7, 3, ncclUint8, 5, other_comm, stream) == ncclSuccess);
  EXPECT(reduce(buf + 8, buf + 9, 11, ncclFloat64, ncclSum, 2, comm, stream) == ncclSuccess);
  EXPECT(send(buf + 10, 4, ncclInt32, 3, comm, stream) == ncclSuccess);
  EXPECT(recv(buf + 11, 6, ncclInt32, 1, comm, stream) == ncclSuccess);
  // A group: one interval, bytes summed, on the first member's operation.
  EXPECT(group_start() == ncclSuccess);
  EXPECT(send(buf + 12, 100, ncclFloat32, 1, comm, stream) == ncclSuccess);
  EXPECT(recv(buf + 13, 50, ncclFloat32, 1, comm, stream) == ncclSuccess);
  EXPECT(group_end() == ncclSuccess);
  // A failing call: its code comes back unchanged and no interval is written.
  set_result(5);
  EXPECT(all_reduce(buf, buf, 1, ncclFloat32, ncclSum, comm, stream) == 5);
  set_result(0);

  // Forwarded with the same arguments.
  std::vector<FakeNcclCall> calls(32);
  const size_t n = logged(calls.data(), calls.size());
  EXPECT(n == 12);
  if (n >= 12) {
    EXPECT(std::strcmp(calls[0].function, "ncclAllReduce") == 0);
    EXPECT(calls[0].sendbuff == buf && calls[0].recvbuff == buf + 1 && calls[0].count == 1000);
    EXPECT(calls[0].datatype == ncclFloat32 && calls[0].op == 2 && calls[0].comm == comm &&
           calls[0].stream == stream);
    EXPECT(std::strcmp(calls[1].function, "ncclReduceScatter") == 0 && calls[1].count == 10 &&
           calls[1].datatype == ncclFloat16 && calls[1].recvbuff == buf + 3);
    EXPECT(std::strcmp(calls[2].function, "ncclAllGather") == 0 && calls[2].count == 7 &&
           calls[2].datatype == ncclInt64);
    EXPECT(std::strcmp(calls[3].function, "ncclBroadcast") == 0 && calls[3].root_or_peer == 5 &&
           calls[3].comm == other_comm && calls[3].datatype == ncclUint8);
    EXPECT(std::strcmp(calls[4].function, "ncclReduce") == 0 && calls[4].root_or_peer == 2 &&
           calls[4].datatype == ncclFloat64);
    EXPECT(std::strcmp(calls[5].function, "ncclSend") == 0 && calls[5].root_or_peer == 3 &&
           calls[5].sendbuff == buf + 10 && calls[5].count == 4);
    EXPECT(std::strcmp(calls[6].function, "ncclRecv") == 0 && calls[6].root_or_peer == 1 &&
           calls[6].recvbuff == buf + 11 && calls[6].count == 6);
    EXPECT(std::strcmp(calls[7].function, "ncclGroupStart") == 0);
    EXPECT(std::strcmp(calls[10].function, "ncclGroupEnd") == 0);
    EXPECT(std::strcmp(calls[11].function, "ncclAllReduce") == 0 && calls[11].count == 1);
  }

  // The probe ring, read as the sidecar reads it.
  const char* dir = std::getenv("STAGEFRONTIER_SHM_DIR");
  const char* job = std::getenv("STAGEFRONTIER_JOB_ID");
  auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, job));
  if (!seg.ok()) {
    std::fprintf(stderr, "FAILED: %s\n", std::string(seg.status().message()).c_str());
    return 1;
  }
  shm::ProbeRingReader reader((*seg)->view());
  std::vector<shm::ProbeInterval> got;
  const int64_t last_call = shm::MonotonicNowNs();
  for (int i = 0; i < 400 && (got.size() < 8 || reader.ResolvedThrough(0) < last_call); ++i) {
    reader.Drain(0, [&](const shm::ProbeInterval& p) { got.push_back(p); });
    usleep(5000);
  }
  EXPECT(got.size() == 8);
  const uint16_t ops[8] = {shm::v2::kOpAllReduce, shm::v2::kOpReduceScatter, shm::v2::kOpAllGather,
                           shm::v2::kOpBroadcast, shm::v2::kOpReduce,        shm::v2::kOpSend,
                           shm::v2::kOpRecv,      shm::v2::kOpSend};
  const uint64_t bytes[8] = {4000, 20, 56, 3, 88, 16, 24, 600};
  int64_t previous_end = t0;
  for (size_t i = 0; i < got.size() && i < 8; ++i) {
    const shm::ProbeInterval& p = got[i];
    std::printf("interval %zu: %s bytes=%llu seq=%llu call->start %lld ns, start->end %lld ns\n", i,
                shm::v2::CollectiveOpName(p.op), static_cast<unsigned long long>(p.bytes),
                static_cast<unsigned long long>(p.collective_seq),
                static_cast<long long>(p.start_ns - p.call_ns),
                static_cast<long long>(p.end_ns - p.start_ns));
    EXPECT(p.op == ops[i]);
    EXPECT(p.bytes == bytes[i]);
    EXPECT(p.collective_seq == i);
    EXPECT(p.comm_id == reinterpret_cast<uint64_t>(i == 3 ? other_comm : comm));
    EXPECT(p.call_ns >= previous_end && p.call_ns <= p.start_ns && p.start_ns <= p.end_ns);
    EXPECT(p.end_ns - p.start_ns >= 250'000);  // the fake sleeps 300 us per collective
    EXPECT((p.flags & shm::v2::kProbeInGroup) == (i == 7 ? shm::v2::kProbeInGroup : 0));
    previous_end = p.end_ns;
  }
  const shm::ProbeRingReport r = reader.Report(0);
  EXPECT(r.backend == shm::v2::kProbeBackendHostClock);
  EXPECT(r.producer_pid == static_cast<uint32_t>(getpid()));
  EXPECT(r.collectives_seen == 9);  // 7 single calls, 1 group, 1 failed call
  EXPECT(r.invalid == 0 && r.dropped_full == 0 && r.dropped_unresolved == 0);
  std::printf("%s: %d failures\n", failures == 0 ? "PASS" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}
