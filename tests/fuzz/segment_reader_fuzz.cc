// Fuzz target: arbitrary bytes as a mapped segment (layout v1 or v2, step and probe rings).
// Whatever the bytes, the view either refuses them with a status or the reader drains and reports
// without reading outside them. Built with libFuzzer by tests/fuzz/run_libfuzzer.sh; replayed in CI
// by fuzz_replay_test.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shm/probe_ring_reader.h"
#include "shm/segment_reader.h"
#include "shm/segment_view.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (4u << 20)) return 0;
  // The reader writes its cursors back, as it does into shared memory: give it a private,
  // 8-byte aligned copy.
  std::vector<uint64_t> buffer(size / 8 + 1);
  if (size > 0) std::memcpy(buffer.data(), data, size);
  absl::StatusOr<stagefrontier::shm::SegmentView> view =
      stagefrontier::shm::SegmentView::Open(buffer.data(), size);
  if (!view.ok()) return 0;
  stagefrontier::shm::SegmentReader reader(*view);
  uint64_t sum = 0;
  for (int round = 0; round < 2; ++round) {
    reader.Drain([&](const stagefrontier::shm::DrainedStep& s) {
      for (int64_t d : s.DurationsNs()) sum += static_cast<uint64_t>(d);
    });
  }
  for (const auto& r : reader.Reports()) sum += r.records_read + r.invalid + r.torn;
  // Layout v2: the probe rings too.
  stagefrontier::shm::ProbeRingReader probes(*view);
  for (uint32_t i = 0; i < view->slot_count(); ++i) {
    probes.Drain(i, [&](const stagefrontier::shm::ProbeInterval& p) {
      sum += static_cast<uint64_t>(p.end_ns - p.call_ns) + p.bytes;
    });
    sum += probes.Report(i).invalid + static_cast<uint64_t>(probes.Fed(i));
  }
  return sum == 42 ? 0 : 0;  // keep `sum` alive
}
