// The probe rings of layout v2: geometry, one producer per ring, validation of what is read,
// and the threading contract (one producer thread, one reader thread, exact sums; run under
// TSan by ./run.sh test).
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "shm/probe_ring_reader.h"
#include "shm/probe_ring_writer.h"
#include "shm/segment_view.h"

namespace stagefrontier::shm {
namespace {

struct Segment {
  Segment(uint32_t slots, uint32_t capacity, uint32_t probe_capacity)
      : bytes((probe_capacity == 0 ? v1::SegmentBytes(slots, capacity)
                                   : v2::SegmentBytes(slots, capacity, probe_capacity)) /
              8) {
    auto v = SegmentView::Initialize(bytes.data(), bytes.size() * 8, "t", slots, capacity,
                                     probe_capacity);
    REQUIRE(v.ok());
    view = std::make_unique<SegmentView>(*v);
  }
  std::vector<uint64_t> bytes;
  std::unique_ptr<SegmentView> view;
};

ProbeInterval Interval(uint64_t i) {
  ProbeInterval p;
  p.call_ns = static_cast<int64_t>(1000 + 10 * i);
  p.start_ns = p.call_ns + 2;
  p.end_ns = p.call_ns + 7;
  p.bytes = i * 4;
  p.comm_id = 0xC0FFEE;
  p.collective_seq = i;
  p.op = static_cast<uint16_t>(i % v2::kOpCount);
  return p;
}

TEST_CASE("a v2 segment reopens with its probe geometry; a v1 segment still opens") {
  Segment v2seg(3, 8, 16);
  auto reopened = SegmentView::Open(v2seg.bytes.data(), v2seg.bytes.size() * 8);
  REQUIRE(reopened.ok());
  CHECK(reopened->header().layout_version == 2);
  CHECK(reopened->has_probe_rings());
  CHECK(reopened->probe_ring_capacity() == 16);
  CHECK(&reopened->probe_ring(2) == &v2seg.view->probe_ring(2));

  Segment v1seg(3, 8, 0);
  auto old = SegmentView::Open(v1seg.bytes.data(), v1seg.bytes.size() * 8);
  REQUIRE(old.ok());
  CHECK(old->header().layout_version == 1);
  CHECK_FALSE(old->has_probe_rings());
}

TEST_CASE("a corrupt probe geometry or a truncated probe area is refused by name") {
  Segment seg(2, 8, 16);
  auto* g = reinterpret_cast<v2::ProbeGeometry*>(reinterpret_cast<char*>(seg.bytes.data()) +
                                                 v2::kProbeGeometryOffset);
  SECTION("capacity not a power of two") {
    g->probe_ring_capacity = 12;
    auto v = SegmentView::Open(seg.bytes.data(), seg.bytes.size() * 8);
    CHECK(absl::IsDataLoss(v.status()));
    CHECK_THAT(std::string(v.status().message()), Catch::Contains("probe ring capacity 12"));
  }
  SECTION("offset moved") {
    g->probe_offset += 64;
    auto v = SegmentView::Open(seg.bytes.data(), seg.bytes.size() * 8);
    CHECK_THAT(std::string(v.status().message()), Catch::Contains("probe geometry"));
  }
  SECTION("truncated") {
    auto v = SegmentView::Open(seg.bytes.data(), seg.bytes.size() * 8 - 64);
    CHECK(absl::IsDataLoss(v.status()));
    CHECK_THAT(std::string(v.status().message()), Catch::Contains("truncated"));
  }
  CHECK_FALSE(ValidateProbeCapacity(3).ok());
  CHECK(ValidateProbeCapacity(0).ok());
}

TEST_CASE("one producer per probe ring; a v1 segment has none to claim") {
  Segment seg(2, 8, 16);
  ProbeRingWriter a;
  REQUIRE(a.Claim(*seg.view, 1, v2::kProbeBackendHostClock).ok());
  CHECK(seg.view->probe_ring(1).producer_pid.load() == static_cast<uint32_t>(getpid()));
  // Regression: a second producer in the same process was let in (two writers on one
  // single-producer ring).
  ProbeRingWriter a2;
  absl::Status same = a2.Claim(*seg.view, 1, v2::kProbeBackendCuda);
  CHECK(absl::IsAlreadyExists(same));
  CHECK_THAT(std::string(same.message()), Catch::Contains("this process"));
  // Another live process holds it: refused.
  seg.view->probe_ring(0).producer_pid.store(static_cast<uint32_t>(getppid()));
  ProbeRingWriter b;
  absl::Status s = b.Claim(*seg.view, 0, v2::kProbeBackendCuda);
  CHECK(absl::IsAlreadyExists(s));
  // A dead producer's ring is taken over.
  seg.view->probe_ring(0).producer_pid.store(0x7FFFFFF0);
  CHECK(b.Claim(*seg.view, 0, v2::kProbeBackendCuda).ok());
  CHECK(absl::IsOutOfRange(b.Claim(*seg.view, 2, v2::kProbeBackendCuda)));
  a.Release();
  CHECK(seg.view->probe_ring(1).producer_pid.load() == 0);

  Segment old(2, 8, 0);
  ProbeRingWriter c;
  CHECK(absl::IsFailedPrecondition(c.Claim(*old.view, 0, v2::kProbeBackendCuda)));
  CHECK_FALSE(c.TryPublish(Interval(0)));
  ProbeRingReader reader(*old.view);
  CHECK(reader.Drain(0, [](const ProbeInterval&) {}) == 0);
}

TEST_CASE("probe records are validated: bad sequence, unknown op, times out of order") {
  Segment seg(1, 8, 8);
  ProbeRingWriter w;
  REQUIRE(w.Claim(*seg.view, 0, v2::kProbeBackendHostClock).ok());
  for (uint64_t i = 0; i < 5; ++i) REQUIRE(w.TryPublish(Interval(i)));
  seg.view->probe_record(0, 1).seq.store(99);
  seg.view->probe_record(0, 2).op = 77;
  seg.view->probe_record(0, 3).end_ns = 0;
  // Regression (libFuzzer, UBSan): end - call overflowed for a hugely negative call time.
  seg.view->probe_record(0, 4).call_ns = -9223372036854773777;
  std::vector<std::string> errors;
  ProbeRingReader reader(*seg.view, [&](uint32_t, const std::string& m) { errors.push_back(m); });
  std::vector<uint64_t> got;
  CHECK(reader.Drain(0, [&](const ProbeInterval& p) { got.push_back(p.collective_seq); }) == 1);
  CHECK(got == std::vector<uint64_t>{0});
  REQUIRE(errors.size() == 4);
  CHECK_THAT(errors[0], Catch::Contains("sequence 99"));
  CHECK_THAT(errors[1], Catch::Contains("unknown operation 77"));
  CHECK_THAT(errors[2], Catch::Contains("out of order"));
  CHECK_THAT(errors[3], Catch::Contains("call -9223372036854773777"));
  CHECK(reader.Report(0).invalid == 4);
  // Corrupt cursors are skipped, counted, and the ring keeps working.
  seg.view->probe_ring(0).write_cursor.store(1'000'000);
  CHECK(reader.Drain(0, [](const ProbeInterval&) {}) == 0);
  CHECK(reader.Report(0).invalid == 5);
}

TEST_CASE("full probe ring drops and counts; the watermark and counters reach the report") {
  Segment seg(1, 8, 4);
  ProbeRingWriter w;
  REQUIRE(w.Claim(*seg.view, 0, v2::kProbeBackendCuda).ok());
  int published = 0;
  for (uint64_t i = 0; i < 6; ++i) published += w.TryPublish(Interval(i)) ? 1 : 0;
  w.SetResolvedThrough(12345);
  w.CountSeen();
  w.CountUnresolved();
  CHECK(published == 4);
  ProbeRingReader reader(*seg.view);
  CHECK(reader.Fed(0));
  CHECK(reader.ResolvedThrough(0) == 12345);
  CHECK(reader.Drain(0, [](const ProbeInterval&) {}) == 4);
  ProbeRingReport r = reader.Report(0);
  CHECK(r.dropped_full == 2);
  CHECK(r.dropped_unresolved == 1);
  CHECK(r.collectives_seen == 1);
  CHECK(r.backend == v2::kProbeBackendCuda);
  CHECK(r.records_read == 4);
  CHECK(w.TryPublish(Interval(7)));  // room again after the drain
}

TEST_CASE("a producer thread and a reader thread: every interval accounted for exactly") {
  constexpr uint64_t kIntervals = 200000;
  Segment seg(1, 8, 64);
  ProbeRingWriter w;
  REQUIRE(w.Claim(*seg.view, 0, v2::kProbeBackendHostClock).ok());
  std::atomic<bool> done{false};
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> published_sum{0};
  std::thread producer([&] {
    for (uint64_t i = 0; i < kIntervals; ++i) {
      if (w.TryPublish(Interval(i))) {
        published_sum.fetch_add(i);
      } else {
        dropped.fetch_add(1);
      }
    }
    done.store(true);
  });
  ProbeRingReader reader(*seg.view);
  uint64_t count = 0, sum = 0, last = 0, out_of_order = 0;
  auto sink = [&](const ProbeInterval& p) {
    if (count > 0 && p.collective_seq <= last) ++out_of_order;
    if (p.end_ns != p.call_ns + 7 || p.bytes != p.collective_seq * 4) ++out_of_order;
    last = p.collective_seq;
    ++count;
    sum += p.collective_seq;
  };
  while (!done.load()) reader.Drain(0, sink);
  reader.Drain(0, sink);
  producer.join();
  CHECK(out_of_order == 0);
  CHECK(count + dropped.load() == kIntervals);
  CHECK(reader.Report(0).dropped_full == dropped.load());
  CHECK(reader.Report(0).invalid == 0);
  CHECK(sum == published_sum.load());
}

}  // namespace
}  // namespace stagefrontier::shm
