// Writes the seed corpus for segment_reader_fuzz: small valid segments in interesting states
// (records pending, a torn record, a released slot, a wrapped ring). Run once; the output is
// committed under tests/fuzz/corpus/segment_reader/.
//   bazel run //tests/fuzz:make_segment_seeds -- $PWD/tests/fuzz/corpus/segment_reader
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "shm/probe_ring_writer.h"
#include "shm/ring_writer.h"
#include "shm/slot_ownership.h"

namespace sf = stagefrontier::shm;

namespace {
void Write(const std::string& path, const std::vector<uint64_t>& buf, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(size));
}
}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  // Variants 0-3: layout v1. Variants 4-5: layout v2 with probe intervals (5: one corrupt).
  for (int variant = 0; variant < 6; ++variant) {
    const uint32_t slots = variant == 3 || variant == 5 ? 2 : 1;
    const uint32_t cap = 4;
    const uint32_t probe_cap = variant >= 4 ? 4 : 0;
    const size_t size = probe_cap == 0 ? sf::v1::SegmentBytes(slots, cap)
                                       : sf::v2::SegmentBytes(slots, cap, probe_cap);
    std::vector<uint64_t> buf(size / 8);
    auto view = sf::SegmentView::Initialize(buf.data(), size, "seed", slots, cap, probe_cap);
    if (!view.ok()) return 1;
    sf::SlotIdentity id;
    id.rank = 1;
    id.world_size = 2;
    id.stages = {{"data", 0}, {"fwd", 1}, {"sync", 2}};
    for (uint32_t s = 0; s < slots; ++s) {
      if (!sf::ClaimSlot(*view, s, id).ok()) return 1;
      sf::RingWriter w(*view, s);
      const int steps = variant == 2 ? 3 : 2;
      for (int64_t step = 0; step < steps; ++step) {
        const int64_t b[4] = {1000 * step, 1000 * step + 10, 1000 * step + 30, 1000 * step + 60};
        w.TryPublish(step, b[3] + 1, 0, b, 3);
      }
      if (variant == 1)
        view->record(s, view->slot(s).write_cursor.load())
            .seq.store(2 * view->slot(s).write_cursor.load() + 1);  // a torn record in progress
      if (variant == 2) view->slot(s).read_cursor.store(1);         // partly consumed
      if (variant == 3 && s == 1) sf::ReleaseSlot(view->slot(s));
      if (probe_cap == 0) continue;
      sf::ProbeRingWriter probe;
      if (!probe.Claim(*view, s, sf::v2::kProbeBackendHostClock).ok()) return 1;
      for (uint64_t c = 0; c < 3; ++c) {
        sf::ProbeInterval p;
        p.call_ns = 1000 * static_cast<int64_t>(c) + 31;
        p.start_ns = p.call_ns + 5;
        p.end_ns = p.call_ns + 25;
        p.bytes = 4096;
        p.collective_seq = c;
        probe.TryPublish(p);
      }
      probe.SetResolvedThrough(3000);
      if (variant == 5) view->probe_record(s, 1).op = 99;
      probe.Release();
    }
    Write(dir + "/seed" + std::to_string(variant) + ".seg", buf, size);
  }
  std::printf("wrote 6 seeds to %s\n", dir.c_str());
  return 0;
}
