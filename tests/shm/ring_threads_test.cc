// The threading contract under many threads (run under TSan by ./run.sh test): one writer
// thread per slot, one reader thread for the segment; exact sums, drops equal to gaps.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "shm/control_channel.h"
#include "shm/ring_writer.h"
#include "shm/segment_reader.h"
#include "shm/slot_ownership.h"

namespace stagefrontier::shm {
namespace {

TEST_CASE("writer threads and a reader thread: every record accounted for exactly") {
  constexpr uint32_t kSlots = 4;
  constexpr uint32_t kCapacity = 64;
  constexpr int64_t kSteps = 50000;
  std::vector<uint64_t> bytes(v1::SegmentBytes(kSlots, kCapacity) / 8);
  auto view = SegmentView::Initialize(bytes.data(), bytes.size() * 8, "t", kSlots, kCapacity);
  REQUIRE(view.ok());
  SlotIdentity id;
  id.stages = {{"a", 1}, {"b", 2}};
  for (uint32_t i = 0; i < kSlots; ++i) {
    id.rank = static_cast<int32_t>(i);
    REQUIRE(ClaimSlot(*view, i, id).ok());
  }
  // Catch2 assertions are not thread-safe: threads count, the test thread checks.
  std::atomic<int> writers_done{0};
  std::atomic<int> failed_final{0};
  std::vector<SlotReport> reports;
  std::vector<std::thread> writers;
  for (uint32_t i = 0; i < kSlots; ++i) {
    writers.emplace_back([&, i] {
      RingWriter w(*view, i);
      uint64_t seen = 0;
      ControlRequest req;
      for (int64_t s = 0; s <= kSteps; ++s) {
        PollControl(view->slot(i), &seen, &req);  // the stub polls every step
        const int64_t b[3] = {s * 10, s * 10 + 3, s * 10 + 7};
        if (s == kSteps) {
          // The last step waits for room, so every drop shows up as a gap before it.
          while (!w.HasRoom()) std::this_thread::yield();
          if (!w.TryPublish(s, b[2], 0, b, 2)) failed_final.fetch_add(1);
        } else {
          w.TryPublish(s, b[2], 0, b, 2);
        }
      }
      writers_done.fetch_add(1);
    });
  }
  std::vector<int64_t> sum(kSlots, 0);
  std::vector<uint64_t> count(kSlots, 0);
  uint64_t bad = 0;
  std::thread reader_thread([&] {
    SegmentReader reader(*view);
    auto sink = [&](const DrainedStep& s) {
      sum[s.local_rank] += s.step;
      ++count[s.local_rank];
      if (s.DurationsNs() != std::vector<int64_t>{3, 4}) ++bad;
    };
    int posts = 0;
    while (writers_done.load() < static_cast<int>(kSlots)) {
      reader.Drain(sink);
      if (++posts % 100 == 0) {
        ControlRequest r;
        r.request_id = static_cast<uint64_t>(posts);
        for (uint32_t i = 0; i < kSlots; ++i) PostControl(view->slot(i), r);
      }
    }
    reader.Drain(sink);
    reports = reader.Reports();
  });
  for (auto& t : writers) t.join();
  reader_thread.join();
  CHECK(bad == 0);
  CHECK(failed_final.load() == 0);
  REQUIRE(reports.size() == kSlots);
  for (uint32_t i = 0; i < kSlots; ++i) {
    const SlotReport& rep = reports[i];
    INFO("slot " << i << " read " << rep.records_read << " dropped " << rep.dropped_by_writer);
    CHECK(rep.records_read == count[i]);
    // Every step 0..kSteps was either read or dropped, and each drop is one missing step.
    CHECK(rep.records_read + rep.dropped_by_writer == kSteps + 1);
    CHECK(rep.gap_steps == rep.dropped_by_writer);
    CHECK(rep.invalid == 0);
    CHECK(rep.torn == 0);
    CHECK(sum[i] > 0);
  }
}

}  // namespace
}  // namespace stagefrontier::shm
