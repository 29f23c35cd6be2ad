// The probe's core with a scripted event backend: order of resolution, the watermark,
// give-ups, failures, sampling, and concurrent issuers (run under TSan by ./run.sh test).
#include "client/probe/collective_tracker.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "client/probe/host_clock_backend.h"
#include "client/probe/probe_runtime.h"
#include "shm/monotonic_clock.h"
#include "shm/probe_ring_reader.h"

namespace stagefrontier::probe {
namespace {

// Events complete when the test says so, at the time it says.
class ScriptedBackend final : public EventBackend {
 public:
  explicit ScriptedBackend(size_t n) : ready_(n), time_(n), recorded_(n) {}
  const char* name() const override { return "scripted"; }
  uint32_t ring_backend() const override { return shm::v2::kProbeBackendCuda; }
  size_t capacity() const override { return ready_.size(); }
  bool Record(size_t i, void*) noexcept override {
    if (fail_record) return false;
    recorded_[i].store(true);
    ready_[i].store(0);
    return true;
  }
  EventStatus Query(size_t i, int64_t* t) noexcept override {
    const int r = ready_[i].load();
    if (r == 0) return EventStatus::kPending;
    if (r == 2) return EventStatus::kError;
    *t = time_[i].load();
    return EventStatus::kReady;
  }
  void Complete(size_t i, int64_t t) {
    time_[i].store(t);
    ready_[i].store(1);
  }
  void Fail(size_t i) { ready_[i].store(2); }
  bool fail_record = false;

 private:
  std::vector<std::atomic<int>> ready_;
  std::vector<std::atomic<int64_t>> time_;
  std::vector<std::atomic<bool>> recorded_;
};

struct Rig {
  explicit Rig(uint32_t probe_capacity = 64, TrackerOptions options = {})
      : bytes(shm::v2::SegmentBytes(1, 8, probe_capacity) / 8), backend(2 * 8) {
    auto v =
        shm::SegmentView::Initialize(bytes.data(), bytes.size() * 8, "t", 1, 8, probe_capacity);
    REQUIRE(v.ok());
    view = std::make_unique<shm::SegmentView>(*v);
    REQUIRE(ring.Claim(*view, 0, shm::v2::kProbeBackendCuda).ok());
    options.max_pending = 8;
    options.slot = &view->slot(0);
    tracker = std::make_unique<CollectiveTracker>(&backend, &ring, options);
    reader = std::make_unique<shm::ProbeRingReader>(*view);
  }
  std::vector<shm::ProbeInterval> Read() {
    std::vector<shm::ProbeInterval> out;
    reader->Drain(0, [&](const shm::ProbeInterval& p) { out.push_back(p); });
    return out;
  }
  std::vector<uint64_t> bytes;
  std::unique_ptr<shm::SegmentView> view;
  ScriptedBackend backend;
  shm::ProbeRingWriter ring;
  std::unique_ptr<CollectiveTracker> tracker;
  std::unique_ptr<shm::ProbeRingReader> reader;
};

CollectiveCall Call(uint64_t bytes) {
  return CollectiveCall{.op = shm::v2::kOpAllReduce, .flags = 0, .bytes = bytes, .comm_id = 9};
}

TEST_CASE("collectives resolve in call order; a pending one holds back the later ones") {
  Rig rig;
  const int64_t a = rig.tracker->Begin(Call(1), nullptr);
  rig.tracker->End(a, nullptr, true);
  const int64_t b = rig.tracker->Begin(Call(2), nullptr);
  rig.tracker->End(b, nullptr, true);
  REQUIRE(a == 0);
  REQUIRE(b == 1);
  // The second completes first: nothing is published until the first does.
  const int64_t base = shm::MonotonicNowNs() + 1'000'000'000;
  rig.backend.Complete(2, base + 1000);
  rig.backend.Complete(3, base + 1500);
  const int64_t now = shm::MonotonicNowNs();
  CHECK(rig.tracker->Poll(now) == 0);
  CHECK(rig.reader->ResolvedThrough(0) <= now);
  CHECK(rig.Read().empty());
  rig.backend.Complete(0, base);
  rig.backend.Complete(1, base + 900);
  CHECK(rig.tracker->Poll(shm::MonotonicNowNs()) == 2);
  std::vector<shm::ProbeInterval> got = rig.Read();
  REQUIRE(got.size() == 2);
  CHECK(got[0].bytes == 1);
  CHECK(got[1].bytes == 2);
  CHECK(got[0].collective_seq == 0);
  CHECK(got[1].collective_seq == 1);
  CHECK(got[1].end_ns - got[1].start_ns == 500);
  CHECK(rig.tracker->stats().published == 2);
}

TEST_CASE("the watermark stops at the oldest unresolved call, then reaches now") {
  Rig rig;
  const int64_t before = shm::MonotonicNowNs();
  const int64_t a = rig.tracker->Begin(Call(1), nullptr);
  rig.tracker->End(a, nullptr, true);
  rig.tracker->Poll(shm::MonotonicNowNs());
  const int64_t held = rig.reader->ResolvedThrough(0);
  CHECK(held >= before);
  CHECK(held <= shm::MonotonicNowNs());
  const int64_t t = shm::MonotonicNowNs() + 5;
  rig.backend.Complete(0, t);
  rig.backend.Complete(1, t + 10);
  const int64_t now = shm::MonotonicNowNs();
  rig.tracker->Poll(now);
  CHECK(rig.reader->ResolvedThrough(0) == now);
}

TEST_CASE("events that never complete are given up and counted; failures are dropped") {
  TrackerOptions o;
  o.unresolved_after_ns = 1000;
  Rig rig(64, o);
  const int64_t a = rig.tracker->Begin(Call(1), nullptr);
  rig.tracker->End(a, nullptr, true);
  const int64_t b = rig.tracker->Begin(Call(2), nullptr);
  rig.tracker->End(b, nullptr, true);
  rig.backend.Fail(2);
  // Long after the calls: the first is given up, the second failed.
  CHECK(rig.tracker->Poll(shm::MonotonicNowNs() + 1'000'000) == 0);
  CHECK(rig.tracker->stats().unresolved == 2);
  CHECK(rig.reader->Report(0).dropped_unresolved == 2);
  // A failed call and a refused event record are dropped at End.
  const int64_t c = rig.tracker->Begin(Call(3), nullptr);
  rig.tracker->End(c, nullptr, /*ok=*/false);
  rig.backend.fail_record = true;
  const int64_t d = rig.tracker->Begin(Call(4), nullptr);
  rig.tracker->End(d, nullptr, true);
  CHECK(rig.tracker->stats().dropped_failed == 2);
  CHECK(rig.Read().empty());
}

TEST_CASE("a full pending queue and a full probe ring drop and count, never wait") {
  Rig rig(/*probe_capacity=*/2);
  for (int i = 0; i < 10; ++i) {
    const int64_t t = rig.tracker->Begin(Call(static_cast<uint64_t>(i)), nullptr);
    rig.tracker->End(t, nullptr, true);
  }
  CHECK(rig.tracker->stats().dropped_queue == 2);  // 8 pending at most
  for (size_t e = 0; e < 16; ++e) rig.backend.Complete(e, 1000 + static_cast<int64_t>(e));
  rig.tracker->Poll(shm::MonotonicNowNs());
  CHECK(rig.tracker->stats().published == 2);
  CHECK(rig.tracker->stats().dropped_ring == 6);
  CHECK(rig.reader->Report(0).dropped_full == 6);
  CHECK(rig.reader->Report(0).collectives_seen == 10);
}

TEST_CASE("sampling: one step in N, and only while a trace request is in effect") {
  SECTION("every:3") {
    TrackerOptions o;
    o.sampling = *ParseSamplingPolicy("every:3");
    Rig rig(64, o);
    int sampled = 0;
    for (uint64_t step = 0; step < 9; ++step) {
      rig.view->slot(0).write_cursor.store(step);
      const int64_t t = rig.tracker->Begin(Call(1), nullptr);
      sampled += t != CollectiveTracker::kNotSampled;
      rig.tracker->End(t, nullptr, true);
      rig.backend.Complete(0, 1);  // keep the queue moving
    }
    CHECK(sampled == 3);
  }
  SECTION("request") {
    TrackerOptions o;
    o.sampling = *ParseSamplingPolicy("request");
    Rig rig(64, o);
    auto sampled_now = [&] {
      const int64_t t = rig.tracker->Begin(Call(1), nullptr);
      rig.tracker->End(t, nullptr, false);
      return t != CollectiveTracker::kNotSampled;
    };
    CHECK_FALSE(sampled_now());  // no request
    auto& control = rig.view->slot(0).control;
    control.trace_first_step.store(10);
    control.trace_last_step.store(11);  // two steps
    control.request_id.store(7);
    rig.view->slot(0).write_cursor.store(100);
    CHECK(sampled_now());
    rig.view->slot(0).write_cursor.store(101);
    CHECK(sampled_now());
    rig.view->slot(0).write_cursor.store(102);
    CHECK_FALSE(sampled_now());  // the window has passed
  }
  CHECK_FALSE(ParseSamplingPolicy("every:0").ok());
  CHECK_FALSE(ParseSamplingPolicy("often").ok());
  CHECK(ParseSamplingPolicy("all")->mode == SamplingPolicy::Mode::kAll);
}

TEST_CASE("issuers on several threads and the resolver thread: every call accounted for") {
  constexpr int kThreads = 4;
  constexpr int kCalls = 20000;
  std::vector<uint64_t> bytes(shm::v2::SegmentBytes(1, 8, 1024) / 8);
  auto view = shm::SegmentView::Initialize(bytes.data(), bytes.size() * 8, "t", 1, 8, 1024);
  REQUIRE(view.ok());
  shm::ProbeRingWriter ring;
  REQUIRE(ring.Claim(*view, 0, shm::v2::kProbeBackendHostClock).ok());
  std::unique_ptr<EventBackend> backend = MakeHostClockBackend(2 * 64);
  TrackerOptions o;
  o.max_pending = 64;
  CollectiveTracker tracker(backend.get(), &ring, o);
  shm::ProbeRingReader reader(*view);
  std::atomic<int> running{kThreads};
  std::atomic<bool> stop{false};
  uint64_t read = 0, out_of_order = 0, last_seq = 0;
  std::thread resolver([&] {
    while (!stop.load()) {
      tracker.Poll(shm::MonotonicNowNs());
      reader.Drain(0, [&](const shm::ProbeInterval& p) {
        if (read > 0 && p.collective_seq <= last_seq) ++out_of_order;
        if (p.start_ns < p.call_ns || p.end_ns < p.start_ns) ++out_of_order;
        last_seq = p.collective_seq;
        ++read;
      });
    }
  });
  std::vector<std::thread> issuers;
  for (int i = 0; i < kThreads; ++i) {
    issuers.emplace_back([&] {
      for (int c = 0; c < kCalls; ++c) {
        const int64_t t = tracker.Begin(Call(1), nullptr);
        tracker.End(t, nullptr, true);
      }
      running.fetch_sub(1);
    });
  }
  for (auto& t : issuers) t.join();
  // Let the resolver finish what is queued.
  while (tracker.stats().published + tracker.stats().dropped_ring <
         tracker.stats().sampled - tracker.stats().dropped_failed) {
    std::this_thread::yield();
  }
  stop.store(true);
  resolver.join();
  reader.Drain(0, [&](const shm::ProbeInterval&) { ++read; });
  const TrackerStats s = tracker.stats();
  CHECK(out_of_order == 0);
  CHECK(s.begun == uint64_t{kThreads} * kCalls);
  CHECK(s.sampled + s.dropped_busy + s.dropped_queue == s.begun);
  CHECK(s.published + s.dropped_ring == s.sampled);
  CHECK(read == s.published);
  CHECK(reader.Report(0).dropped_full == s.dropped_ring);
}

}  // namespace
}  // namespace stagefrontier::probe
