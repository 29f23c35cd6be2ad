#include "shm/open_stage.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "shm/segment_view.h"
#include "shm/slot_ownership.h"

namespace stagefrontier::shm {
namespace {

TEST_CASE("open stage: zeroed bytes read as nothing published, publications read back") {
  v1::SlotHeader slot{};
  OpenStage o;
  REQUIRE(ReadOpenStage(slot, &o));
  CHECK_FALSE(o.known());  // an older stub never writes these bytes

  OpenStageWriter w(&slot);
  w.Publish(7, 1000, OpenCode(2));
  REQUIRE(ReadOpenStage(slot, &o));
  CHECK(o.known());
  CHECK(o.in_stage());
  CHECK_FALSE(o.between_steps());
  CHECK(o.stage() == 2);
  CHECK(o.step == 7);
  CHECK(o.since_ns == 1000);
  CHECK(o.seq == 2);
  CHECK(slot.open_stage.load() == 3);

  w.Publish(7, 2000, kOpenBetweenSteps);
  REQUIRE(ReadOpenStage(slot, &o));
  CHECK(o.between_steps());
  CHECK_FALSE(o.in_stage());
  CHECK(o.since_ns == 2000);
  CHECK(o.seq == 4);
}

TEST_CASE("open stage: a torn write is not read; a reset clears it and stays even") {
  v1::SlotHeader slot{};
  OpenStageWriter(&slot).Publish(3, 10, OpenCode(0));
  // A writer that died mid-write leaves the sequence odd.
  slot.open_seq.store(5);
  slot.open_stage.store(OpenCode(1));
  OpenStage o;
  o.step = -1;
  CHECK_FALSE(ReadOpenStage(slot, &o, 3));
  CHECK(o.step == -1);  // untouched
  ResetOpenStage(slot);
  CHECK(slot.open_seq.load() == 8);
  REQUIRE(ReadOpenStage(slot, &o));
  CHECK_FALSE(o.known());
  CHECK(o.step == 0);
  CHECK(o.since_ns == 0);
  // A writer started after the reset continues from the slot's sequence.
  OpenStageWriter w(&slot);
  w.Publish(4, 20, OpenCode(1));
  REQUIRE(ReadOpenStage(slot, &o));
  CHECK(o.seq == 10);
  CHECK(o.stage() == 1);
}

TEST_CASE("open stage: a claim clears the previous owner's open stage") {
  constexpr uint32_t kSlots = 1;
  constexpr uint32_t kCapacity = 4;
  std::vector<uint64_t> bytes(v1::SegmentBytes(kSlots, kCapacity) / 8);
  auto view = SegmentView::Initialize(bytes.data(), bytes.size() * 8, "t", kSlots, kCapacity);
  REQUIRE(view.ok());
  SlotIdentity id;
  id.stages = {{"a", 1}, {"b", 2}};
  REQUIRE(ClaimSlot(*view, 0, id).ok());
  OpenStageWriter(&view->slot(0)).Publish(12, 99, OpenCode(1));
  // A dead owner, mid-write.
  view->slot(0).open_seq.fetch_add(1);
  view->slot(0).owner_pid.store(0);
  REQUIRE(ClaimSlot(*view, 0, id).ok());
  OpenStage o;
  REQUIRE(ReadOpenStage(view->slot(0), &o));
  CHECK_FALSE(o.known());
  CHECK(o.seq % 2 == 0);
}

// One writer thread, one reader thread (run under TSan by ./run.sh test): every read is a
// consistent triple, and reads never go backwards.
TEST_CASE("open stage: a concurrent reader sees only consistent, advancing triples") {
  v1::SlotHeader slot{};
  constexpr int64_t kPublications = 200000;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    OpenStageWriter w(&slot);
    for (int64_t i = 1; i <= kPublications; ++i) {
      const uint32_t code = i % 7 == 0 ? kOpenBetweenSteps : OpenCode(static_cast<uint32_t>(i % 5));
      w.Publish(i, i * 10, code);
    }
    done.store(true);
  });
  // Catch2 assertions are not thread-safe: the reader counts, the test thread checks.
  uint64_t reads = 0;
  uint64_t torn = 0;
  uint64_t inconsistent = 0;
  uint64_t backwards = 0;
  std::thread reader([&] {
    int64_t last_step = 0;
    uint64_t last_seq = 0;
    for (bool last = false; !last;) {  // one more read after the writer is done
      last = done.load();
      OpenStage o;
      if (!ReadOpenStage(slot, &o)) {
        ++torn;
        continue;
      }
      ++reads;
      if (!o.known()) {
        if (o.seq != 0) ++inconsistent;
        continue;
      }
      const uint32_t want =
          o.step % 7 == 0 ? kOpenBetweenSteps : OpenCode(static_cast<uint32_t>(o.step % 5));
      if (o.since_ns != o.step * 10 || o.code != want || o.seq != 2 * uint64_t(o.step)) {
        ++inconsistent;
      }
      if (o.step < last_step || o.seq < last_seq) ++backwards;
      last_step = o.step;
      last_seq = o.seq;
    }
  });
  writer.join();
  reader.join();
  CHECK(inconsistent == 0);
  CHECK(backwards == 0);
  INFO("reads " << reads << ", all attempts torn " << torn);
  CHECK(reads > 0);
  OpenStage o;
  REQUIRE(ReadOpenStage(slot, &o));
  CHECK(o.step == kPublications);
}

}  // namespace
}  // namespace stagefrontier::shm
