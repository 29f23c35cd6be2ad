// Prints the probe ring of one slot of a segment, one interval per line:
//   op bytes collective_seq call_ns start_ns end_ns
// then a summary line "backend <name> intervals N invalid N dropped N". Used by
// gpu_check.sh to check what the CUDA backend wrote.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "shm/probe_ring_reader.h"
#include "shm/segment_file.h"

int main(int argc, char** argv) {
  using namespace stagefrontier;
  if (argc != 3) {
    std::fprintf(stderr, "usage: probe_ring_dump SEGMENT LOCAL_RANK\n");
    return 2;
  }
  auto seg = shm::MappedSegment::Attach(argv[1]);
  if (!seg.ok()) {
    std::fprintf(stderr, "probe_ring_dump: %s\n", std::string(seg.status().message()).c_str());
    return 1;
  }
  const uint32_t slot = static_cast<uint32_t>(std::atoi(argv[2]));
  shm::ProbeRingReader reader((*seg)->view());
  size_t n = 0;
  reader.Drain(
      slot,
      [&](const shm::ProbeInterval& p) {
        std::printf("%s %llu %llu %lld %lld %lld\n", shm::v2::CollectiveOpName(p.op),
                    static_cast<unsigned long long>(p.bytes),
                    static_cast<unsigned long long>(p.collective_seq),
                    static_cast<long long>(p.call_ns), static_cast<long long>(p.start_ns),
                    static_cast<long long>(p.end_ns));
        ++n;
      },
      1 << 20);
  const shm::ProbeRingReport r = reader.Report(slot);
  std::printf("backend %s intervals %zu invalid %llu dropped %llu\n",
              shm::v2::ProbeBackendName(r.backend), n, static_cast<unsigned long long>(r.invalid),
              static_cast<unsigned long long>(r.dropped_full + r.dropped_unresolved));
  return 0;
}
