// Fuzz target: a live segment whose bytes change while the sidecar reads them. The input is a
// script: a geometry, records the stub publishes, and writes of arbitrary bytes at arbitrary
// offsets (header, slot headers, records, probe rings) between the reader's polls, as another
// process with write access could do. Whatever is written, the reader never reads outside the
// bytes it validated when it opened the view, and never allocates by what it reads.
//
// Script bytes: [slots:1][log2 capacity:1] then commands:
//   0 publish: [slot:1][step:8][stage durations: 4 x 2]
//   1 poke:    [offset:4][len:1][bytes:len]     (offset modulo the segment size)
//   2 drain
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shm/probe_ring_reader.h"
#include "shm/ring_writer.h"
#include "shm/segment_reader.h"
#include "shm/segment_view.h"
#include "shm/slot_ownership.h"

namespace sfs = stagefrontier::shm;

namespace {

struct Script {
  const uint8_t* p;
  const uint8_t* end;
  bool Take(void* out, size_t n) {
    if (static_cast<size_t>(end - p) < n) return false;
    std::memcpy(out, p, n);
    p += n;
    return true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Script in{data, data + size};
  uint8_t slots = 0, log_cap = 0;
  if (!in.Take(&slots, 1) || !in.Take(&log_cap, 1)) return 0;
  const uint32_t slot_count = 1 + slots % 4;
  const uint32_t capacity = 1u << (1 + log_cap % 5);
  const uint64_t bytes = sfs::v2::SegmentBytes(slot_count, capacity, 16);
  std::vector<uint64_t> buffer(bytes / 8 + 1);
  auto init = sfs::SegmentView::Initialize(buffer.data(), bytes, "fuzz", slot_count, capacity, 16);
  if (!init.ok()) return 0;
  std::vector<sfs::RingWriter> writers;
  for (uint32_t i = 0; i < slot_count; ++i) {
    sfs::SlotIdentity id;
    id.rank = static_cast<int32_t>(i);
    id.world_size = static_cast<int32_t>(slot_count);
    id.stages = {{"a", 0}, {"b", 1}, {"c", 2}, {"d", 3}};
    if (!sfs::ClaimSlot(*init, i, id).ok()) return 0;
    writers.emplace_back(*init, i);
  }
  auto view = sfs::SegmentView::Open(buffer.data(), bytes);
  if (!view.ok()) return 0;
  sfs::ReaderOptions options;
  options.commit_on_drain = (size % 2) == 0;
  sfs::SegmentReader reader(*view, options);
  sfs::ProbeRingReader probes(*view);
  uint64_t sum = 0;
  uint8_t command = 0;
  while (in.Take(&command, 1)) {
    switch (command % 3) {
      case 0: {
        uint8_t slot = 0;
        int64_t step = 0;
        uint16_t d[4] = {};
        if (!in.Take(&slot, 1) || !in.Take(&step, 8) || !in.Take(d, sizeof(d))) return 0;
        int64_t b[5] = {1000};
        for (int k = 0; k < 4; ++k) b[k + 1] = b[k] + d[k];
        writers[slot % slot_count].TryPublish(step, b[4], 0, b, 4);
        break;
      }
      case 1: {
        uint32_t offset = 0;
        uint8_t len = 0;
        if (!in.Take(&offset, 4) || !in.Take(&len, 1)) return 0;
        const uint64_t at = offset % bytes;
        const size_t n = static_cast<size_t>(std::min<uint64_t>(len, bytes - at));
        if (!in.Take(reinterpret_cast<char*>(buffer.data()) + at, n)) return 0;
        break;
      }
      case 2:
        reader.Drain([&](const sfs::DrainedStep& s) {
          for (int64_t v : s.DurationsNs()) sum += static_cast<uint64_t>(v);
        });
        for (const sfs::SlotReport& r : reader.Reports()) sum += r.invalid + r.pending;
        for (uint32_t i = 0; i < view->slot_count(); ++i) {
          probes.Drain(i, [&](const sfs::ProbeInterval& p) { sum += p.bytes; });
        }
        sum += view->HeaderUnchanged() ? 1 : 0;
        break;
    }
  }
  return sum == 42 ? 0 : 0;  // keep `sum` alive
}
