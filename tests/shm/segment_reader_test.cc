// The reader's validation: every way a record can be wrong is counted under the right name,
// with a message, and the reader goes on with the next record.
#include "shm/segment_reader.h"

#include <catch2/catch.hpp>
#include <vector>

#include "shm/monotonic_clock.h"
#include "shm/ring_writer.h"
#include "shm/slot_ownership.h"

namespace stagefrontier::shm {
namespace {

struct Fixture {
  Fixture() : bytes(v1::SegmentBytes(2, 8) / 8) {
    auto v = SegmentView::Initialize(bytes.data(), v1::SegmentBytes(2, 8), "t", 2, 8);
    REQUIRE(v.ok());
    view = std::make_unique<SegmentView>(*v);
    SlotIdentity id;
    id.rank = 9;
    id.world_size = 10;
    id.stages = {{"a", 0}, {"b", 1}, {"c", 2}};
    REQUIRE(ClaimSlot(*view, 0, id).ok());
    writer = RingWriter(*view, 0);
    ReaderOptions o;
    o.on_error = [this](uint32_t, const std::string& m) { errors.push_back(m); };
    reader = std::make_unique<SegmentReader>(*view, o);
  }
  bool Publish(int64_t step, std::vector<int64_t> b, int64_t end = -1, uint32_t stages = 3) {
    return writer.TryPublish(step, end < 0 ? b.back() : end, 0, b.data(), stages);
  }
  std::vector<DrainedStep> Drain() {
    std::vector<DrainedStep> out;
    reader->Drain([&](const DrainedStep& s) { out.push_back(s); });
    return out;
  }
  std::vector<uint64_t> bytes;
  std::unique_ptr<SegmentView> view;
  RingWriter writer;
  std::unique_ptr<SegmentReader> reader;
  std::vector<std::string> errors;
};

TEST_CASE("valid records become durations with the slot's identity") {
  Fixture f;
  REQUIRE(f.Publish(7, {100, 110, 130, 160}, 165));
  auto got = f.Drain();
  REQUIRE(got.size() == 1);
  CHECK(got[0].rank == 9);
  CHECK(got[0].local_rank == 0);
  CHECK(got[0].step == 7);
  CHECK(got[0].end_ns == 165);
  CHECK(got[0].generation == 1);
  CHECK(got[0].DurationsNs() == std::vector<int64_t>{10, 20, 30});
  const SlotReport r = f.reader->Report(0);
  CHECK(r.records_read == 1);
  CHECK(r.stages.size() == 3);
  CHECK(r.stages[2] == std::make_pair(std::string("c"), uint8_t{2}));
  CHECK(r.pending == 0);
  CHECK(f.errors.empty());
}

TEST_CASE("a full ring drops and counts, and never overwrites unread records") {
  Fixture f;
  for (int64_t s = 0; s < 8; ++s) REQUIRE(f.Publish(s, {s, s + 1, s + 2, s + 3}));
  CHECK_FALSE(f.Publish(8, {8, 9, 10, 11}));
  CHECK_FALSE(f.Publish(9, {9, 10, 11, 12}));
  CHECK(f.writer.dropped() == 2);
  auto got = f.Drain();
  REQUIRE(got.size() == 8);
  CHECK(got.back().step == 7);
  REQUIRE(f.Publish(10, {10, 11, 12, 13}));
  got = f.Drain();
  REQUIRE(got.size() == 1);
  const SlotReport r = f.reader->Report(0);
  CHECK(r.dropped_by_writer == 2);
  CHECK(r.gap_steps == 2);
}

TEST_CASE("each kind of bad record is counted and skipped") {
  Fixture f;
  REQUIRE(f.Publish(0, {0, 1, 2, 3}));
  REQUIRE(f.Publish(1, {10, 9, 12, 13}));              // stage a ends before it starts
  REQUIRE(f.Publish(2, {20, 21, 22, 23}, 22));         // ends before its last stage
  REQUIRE(f.Publish(3, {30, 31, 32, 33, 34}, 34, 4));  // 4 stages, schema has 3
  REQUIRE(f.Publish(0, {40, 41, 42, 43}));             // step goes backwards
  REQUIRE(f.Publish(5, {50, 51, 51 + kMaxStageNs + 1, 51 + kMaxStageNs + 2}));  // > a day
  REQUIRE(f.Publish(6, {-5, 1, 2, 3}));                                         // negative start
  // Regression: a step number the coordinator refuses (beyond 2^40) was accepted here and then
  // re-sent forever by the sidecar.
  REQUIRE(f.Publish(kMaxStepNumber + 1, {60, 61, 62, 63}));
  auto got = f.Drain();  // the ring holds 8
  REQUIRE(f.Publish(7, {70, 71, 72, 73}));
  for (const DrainedStep& s : f.Drain()) got.push_back(s);
  REQUIRE(got.size() == 2);
  CHECK(got[0].step == 0);
  CHECK(got[1].step == 7);
  const SlotReport r = f.reader->Report(0);
  CHECK(r.invalid == 7);
  CHECK(r.torn == 0);
  CHECK(r.gap_steps == 6);
  REQUIRE(f.errors.size() == 7);
  CHECK(f.errors[0] ==
        "local rank 0: record 1 (step 1): a stage ends before it starts (stage \"a\")");
  CHECK(f.errors[1] == "local rank 0: record 2 (step 2): the step ends before its last stage");
  CHECK(f.errors[2] == "local rank 0: record 3 has 4 stages, the schema has 3");
  CHECK(f.errors[3] == "local rank 0: step 0 is not after step 0 (duplicated or out of order)");
  CHECK(f.errors[4] ==
        "local rank 0: record 5 (step 5): a stage lasts more than a day (stage \"b\")");
  CHECK(f.errors[5] == "local rank 0: record 6 (step 6): step starts at a negative time");
  CHECK(f.errors[6] ==
        "local rank 0: record 7 (step 1099511627776): step number outside [0, 2^40)");
  CHECK(r.last_error == f.errors[6]);
}

TEST_CASE("overwritten records and corrupt cursors are detected") {
  Fixture f;
  REQUIRE(f.Publish(0, {0, 1, 2, 3}));
  REQUIRE(f.Publish(1, {1, 2, 3, 4}));
  f.view->record(0, 1).seq.store(2 * 9 + 2);  // as if a later lap had written it
  auto got = f.Drain();
  CHECK(got.size() == 1);
  CHECK(f.errors.back() ==
        "local rank 0: record 1 has sequence 20, expected 4 (overwritten or corrupt)");
  f.view->slot(0).write_cursor.store(1000);
  CHECK(f.Drain().empty());
  CHECK(f.errors.back().find("more than a ring apart: corrupt cursors, skipping to 1000") !=
        std::string::npos);
  CHECK(f.view->slot(0).read_cursor.load() == 1000);
  CHECK(f.reader->Report(0).invalid == 2);
}

TEST_CASE("unread records of a previous owner: kept with the same schema, refused with another") {
  Fixture f;
  REQUIRE(f.Publish(10, {0, 1, 2, 3}));
  ReleaseSlot(f.view->slot(0));
  SlotIdentity same;
  same.stages = {{"a", 0}, {"b", 1}, {"c", 2}};
  REQUIRE(ClaimSlot(*f.view, 0, same).ok());  // an elastic restart: same schema
  RingWriter second(*f.view, 0);
  int64_t b[4] = {5, 6, 7, 8};
  REQUIRE(second.TryPublish(0, 8, 0, b, 3));  // its steps start again at 0
  ReleaseSlot(f.view->slot(0));
  SlotIdentity other;
  other.stages = {{"x", 1}, {"y", 2}};
  REQUIRE(ClaimSlot(*f.view, 0, other).ok());  // another program, another schema
  RingWriter third(*f.view, 0);
  int64_t c[3] = {9, 10, 11};
  REQUIRE(third.TryPublish(0, 11, 0, c, 2));
  // The reader only now looks: it knows the current (third) schema.
  auto got = f.Drain();
  REQUIRE(got.size() == 1);
  CHECK(got[0].generation == 3);
  CHECK(got[0].boundaries_ns == std::vector<int64_t>{9, 10, 11});
  REQUIRE(f.errors.size() == 2);
  CHECK(f.errors[0] ==
        "local rank 0: record 0 was written under another schema (by owner generation 1, "
        "before the slot's current owner)");
  CHECK(f.reader->Report(0).invalid == 2);
}

TEST_CASE("an owner restarting its step numbers with the same schema is not an error") {
  Fixture f;
  REQUIRE(f.Publish(10, {0, 1, 2, 3}));
  f.Drain();
  ReleaseSlot(f.view->slot(0));
  SlotIdentity same;
  same.stages = {{"a", 0}, {"b", 1}, {"c", 2}};
  REQUIRE(ClaimSlot(*f.view, 0, same).ok());
  RingWriter second(*f.view, 0);
  int64_t b[4] = {5, 6, 7, 8};
  REQUIRE(second.TryPublish(0, 8, 0, b, 3));
  auto got = f.Drain();
  REQUIRE(got.size() == 1);
  CHECK(got[0].step == 0);
  CHECK(f.errors.empty());
}

TEST_CASE("records in a slot without a valid schema are refused") {
  Fixture f;
  v1::SlotHeader& s = f.view->slot(1);
  s.state.store(v1::kSlotActive);
  s.stage_count = 40;
  RingWriter w(*f.view, 1);
  int64_t b[4] = {0, 1, 2, 3};
  REQUIRE(w.TryPublish(0, 3, 0, b, 3));
  CHECK(f.Drain().empty());
  CHECK(f.errors.at(0) == "local rank 1: slot schema has 40 stages");
  CHECK(f.errors.at(1) == "local rank 1: record 0 arrived in a slot without a valid schema");
  // Regression: the bad schema was counted and logged again on every poll.
  for (int poll = 0; poll < 5; ++poll) f.Drain();
  CHECK(f.errors.size() == 2);
  CHECK(f.reader->Report(1).invalid == 2);
  // A new owner (generation) is judged afresh.
  s.generation.fetch_add(1);
  f.Drain();
  CHECK(f.errors.size() == 3);
}

TEST_CASE("the slot's rank layout is reported; none when the owner declared none") {
  Fixture f;
  f.reader->RefreshSchemas();
  CHECK_FALSE(f.reader->Report(0).layout.declared());  // the fixture's owner declared none
  SlotIdentity id;
  id.rank = 3;
  id.world_size = 8;
  id.stages = {{"a", 0}};
  id.layout =
      SlotLayout{.pipeline_stage = 1, .pipeline_stages = 2, .tensor_rank = 3, .tensor_size = 4};
  REQUIRE(ClaimSlot(*f.view, 1, id).ok());
  f.reader->RefreshSchemas();
  const SlotReport r = f.reader->Report(1);
  CHECK(r.layout == id.layout);
  CHECK(r.invalid == 0);
  CHECK(f.errors.empty());
}

// Hostile input: the layout bytes are the trainer's to write. An inconsistent layout is
// counted (once per owner generation) and reported as none; the slot's schema and records
// are still good.
TEST_CASE("an inconsistent layout in a slot reads as none and is counted") {
  Fixture f;
  v1::SlotHeader& s = f.view->slot(0);
  struct Case {
    uint16_t stage, stages, rank, size;
    const char* message;
  };
  const Case cases[] = {
      {2, 2, 0, 1,
       "local rank 0: slot rank layout (pipeline stage 2 of 2, tensor rank 0 of 1) is "
       "inconsistent: taken as none declared"},
      {0, 1, 0, 0,
       "local rank 0: slot rank layout (pipeline stage 0 of 1, tensor rank 0 of 0) is "
       "inconsistent: taken as none declared"},
      {0, 1, 5, 5,
       "local rank 0: slot rank layout (pipeline stage 0 of 1, tensor rank 5 of 5) is "
       "inconsistent: taken as none declared"},
      {65535, 1, 65535, 65535,
       "local rank 0: slot rank layout (pipeline stage 65535 of 1, tensor rank 65535 of 65535) "
       "is inconsistent: taken as none declared"},
  };
  uint64_t expected_invalid = 0;
  int64_t step = 0;
  for (const Case& c : cases) {
    s.pipeline_stage = c.stage;
    s.pipeline_stages = c.stages;
    s.tensor_rank = c.rank;
    s.tensor_size = c.size;
    s.generation.fetch_add(1);  // judged once per owner generation
    const int64_t t = 1000 * step;
    REQUIRE(f.Publish(step, {t + 100, t + 110, t + 130, t + 160}));
    ++step;
    CHECK(f.Drain().size() == 1);  // the records still go on
    ++expected_invalid;
    const SlotReport r = f.reader->Report(0);
    CHECK_FALSE(r.layout.declared());
    CHECK(r.layout == SlotLayout{});
    CHECK(r.invalid == expected_invalid);
    CHECK(r.stages.size() == 3);
    REQUIRE(!f.errors.empty());
    CHECK(f.errors.back() == c.message);
    // Not counted again on later polls of the same generation.
    f.Drain();
    CHECK(f.reader->Report(0).invalid == expected_invalid);
  }
  // Garbage without pipeline_stages is "none declared", as an older stub's zeros are.
  s.pipeline_stage = 7;
  s.pipeline_stages = 0;
  s.tensor_rank = 9;
  s.tensor_size = 0;
  s.generation.fetch_add(1);
  f.Drain();
  CHECK_FALSE(f.reader->Report(0).layout.declared());
  CHECK(f.reader->Report(0).invalid == expected_invalid);
}

// Regression (hostile input): random bytes over a live segment's header (a slot count of
// 2^32 - 1, a huge ring capacity) made the sidecar index past the mapping (SIGSEGV) or
// allocate gigabytes. The view keeps the geometry it validated when it was opened.
TEST_CASE("a header overwritten after opening changes nothing the reader computes") {
  Fixture f;
  REQUIRE(f.Publish(0, {0, 1, 2, 3}));
  CHECK(f.view->HeaderUnchanged());
  v1::SegmentHeader& h = const_cast<v1::SegmentHeader&>(f.view->header());
  h.slot_count = 0xFFFFFFFFu;
  h.ring_capacity = 1u << 31;
  h.slot_bytes = 1ull << 60;
  CHECK_FALSE(f.view->HeaderUnchanged());
  CHECK(f.view->slot_count() == 2);
  CHECK(f.view->ring_capacity() == 8);
  const auto got = f.Drain();
  REQUIRE(got.size() == 1);
  CHECK(f.reader->Reports().size() == 2);
  // Opening the scribbled bytes again is refused, naming the field.
  auto again = SegmentView::Open(f.bytes.data(), f.bytes.size() * 8);
  CHECK(absl::IsDataLoss(again.status()));
  CHECK_THAT(std::string(again.status().message()), Catch::Contains("slot count"));
}

}  // namespace
}  // namespace stagefrontier::shm

namespace stagefrontier::shm {
namespace {

TEST_CASE("read-ahead: records stay in the ring until committed; a new reader re-reads them") {
  Fixture f;
  ReaderOptions o;
  o.commit_on_drain = false;
  SegmentReader ahead(*f.view, o);
  const auto drain = [](SegmentReader& r) {
    std::vector<DrainedStep> out;
    r.Drain([&](const DrainedStep& s) { out.push_back(s); });
    return out;
  };
  for (int s = 0; s < 8; ++s) REQUIRE(f.Publish(s, {0, 1, 2, 3}));
  CHECK(!f.Publish(8, {0, 1, 2, 3}));  // ring of 8 is full
  auto got = drain(ahead);
  REQUIRE(got.size() == 8);
  CHECK(got[3].cursor_after == 4);
  CHECK(drain(ahead).empty());  // read ahead: not delivered twice
  // Nothing committed yet: the writer still sees a full ring.
  CHECK(!f.Publish(8, {0, 1, 2, 3}));
  CHECK(ahead.ReadAhead(0) == 8);
  ahead.Commit(0, got[4].cursor_after);  // the first 5 were acknowledged
  CHECK(f.view->slot(0).read_cursor.load() == 5);
  ahead.Commit(0, 3);   // behind the committed cursor: ignored
  ahead.Commit(0, 99);  // beyond what was read: ignored
  CHECK(f.view->slot(0).read_cursor.load() == 5);
  REQUIRE(f.Publish(8, {0, 1, 2, 3}));
  // A successor (the sidecar restarted) starts at the committed cursor: steps 5..8.
  SegmentReader successor(*f.view, o);
  got = drain(successor);
  REQUIRE(got.size() == 4);
  CHECK(got.front().step == 5);
  CHECK(got.back().step == 8);
  // Rewind: a new stream re-reads what was not committed, without calling it out of order.
  successor.Commit(0, got[1].cursor_after);
  successor.Rewind();
  got = drain(successor);
  REQUIRE(got.size() == 2);
  CHECK(got.front().step == 7);
  CHECK(successor.Report(0).invalid == 0);
}

}  // namespace
}  // namespace stagefrontier::shm

namespace stagefrontier::shm {
namespace {

// Regression (hostile input): after one record with a step number far ahead, every later
// record of the slot was refused as "not after" it.
TEST_CASE("one out-of-sequence step number is skipped over, not the rest of the stream") {
  Fixture f;
  REQUIRE(f.Publish(10, {0, 1, 2, 3}));
  REQUIRE(f.Publish(11, {10, 11, 12, 13}));
  REQUIRE(f.Publish(900'000, {20, 21, 22, 23}));  // corrupt
  REQUIRE(f.Publish(12, {30, 31, 32, 33}));
  REQUIRE(f.Publish(13, {40, 41, 42, 43}));
  REQUIRE(f.Publish(11, {50, 51, 52, 53}));  // a real duplicate is still refused
  auto got = f.Drain();
  std::vector<int64_t> steps;
  for (const DrainedStep& s : got) steps.push_back(s.step);
  CHECK(steps == std::vector<int64_t>{10, 11, 900'000, 12, 13});
  const SlotReport r = f.reader->Report(0);
  CHECK(r.resynced == 1);
  CHECK(r.invalid == 1);
  CHECK(r.gap_steps == 0);
  CHECK_THAT(f.errors.at(0), Catch::Contains("step 900000 was out of sequence; resynchronized"));
}

}  // namespace
}  // namespace stagefrontier::shm

namespace stagefrontier::shm {
namespace {

// Detector health: clocks that go backwards or run ahead of the node's monotonic clock are
// counted (and said), and the records still go on when their durations are valid.
TEST_CASE("clock trouble is counted: a step starting before the previous ended, a future end") {
  Fixture f;
  REQUIRE(f.Publish(1, {100, 110, 120, 130}));
  REQUIRE(f.Publish(2, {125, 140, 150, 160}));  // starts 5 ns before step 1 ended
  REQUIRE(f.Publish(3, {170, 180, 190, 200}));
  const int64_t future = MonotonicNowNs() + 60 * kClockAheadToleranceNs;
  REQUIRE(f.Publish(4, {future, future + 1, future + 2, future + 3}));
  REQUIRE(f.Publish(5, {-5, 0, 1, 2}));  // refused: negative start, not a clock count
  auto got = f.Drain();
  CHECK(got.size() == 4);
  const SlotReport r = f.reader->Report(0);
  CHECK(r.clock_backwards == 1);
  CHECK(r.clock_ahead == 1);
  CHECK(r.invalid == 1);
  REQUIRE(f.errors.size() == 3);
  CHECK_THAT(f.errors[0], Catch::Contains("step 2 starts 5 ns before the previous step ended"));
  CHECK_THAT(f.errors[1], Catch::Contains("after the node's monotonic clock now"));
}

TEST_CASE("a stage that ends before it starts counts as clock trouble too") {
  Fixture f;
  REQUIRE(f.Publish(1, {100, 90, 120, 130}));
  CHECK(f.Drain().empty());
  CHECK(f.reader->Report(0).clock_backwards == 1);
  CHECK(f.reader->Report(0).invalid == 1);
}

}  // namespace
}  // namespace stagefrontier::shm

namespace stagefrontier::shm {
namespace {

// Regression: after a Rewind (a new stream re-reads what was not acknowledged), the re-read
// records were counted as a clock going backwards, and the coordinator marked the verdicts
// of a restarted job clock_backwards.
TEST_CASE("records re-read after a rewind are not clock trouble") {
  Fixture f;
  for (int s = 0; s < 4; ++s)
    REQUIRE(f.Publish(s, {100 * s, 100 * s + 10, 100 * s + 20, 100 * s + 30}));
  ReaderOptions o;
  o.commit_on_drain = false;
  SegmentReader reader(*f.view, o);
  std::vector<DrainedStep> got;
  reader.Drain([&](const DrainedStep& s) { got.push_back(s); });
  REQUIRE(got.size() == 4);
  reader.Commit(0, got[1].cursor_after);
  reader.Rewind();
  got.clear();
  reader.Drain([&](const DrainedStep& s) { got.push_back(s); });
  REQUIRE(got.size() == 2);
  CHECK(reader.Report(0).clock_backwards == 0);
}

}  // namespace
}  // namespace stagefrontier::shm
