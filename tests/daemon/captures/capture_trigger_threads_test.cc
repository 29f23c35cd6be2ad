// CaptureTrigger's threading contract (run under TSan): jobs tell it of closed windows from
// their own threads while the coordinator's ticker flushes and queries read its decisions;
// every capture asked reaches its sidecar exactly once; the stubs' answers come in from ingest
// threads meanwhile.
#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "daemon/captures/capture_trigger.h"
#include "tests/daemon/events/fake_control_request_sender.h"

namespace stagefrontier {
namespace {

constexpr int kJobs = 4;
constexpr int kWindows = 200;

TEST_CASE("windows from many jobs' threads, flushes and queries at once") {
  CapturePolicyOptions o;
  o.cooldown_windows = 0;
  o.max_per_hour = 3600;
  o.references = 1;
  CaptureTrigger trigger(o);
  testing::FakeControlRequestSender sidecars;
  for (int j = 0; j < kJobs; ++j) sidecars.Serve("job" + std::to_string(j), {0, 1, 2, 3});
  std::atomic<bool> done{false};
  std::vector<std::thread> jobs;
  for (int j = 0; j < kJobs; ++j) {
    jobs.emplace_back([&, j] {
      Verdict v;
      v.label = VerdictLabel::kClear;
      v.candidate_ranks = {j % 4};
      for (int w = 0; w < kWindows; ++w) {
        ClosedJobWindow cw;
        cw.job = "job" + std::to_string(j);
        cw.verdict = &v;
        cw.rank_nodes = {"a", "a", "b", "b"};
        // Far apart: every capture is past its steps by the next window.
        cw.newest_step = int64_t{w} * 1000;
        cw.now_ns = int64_t{w} * 1000 * 1'000'000'000;  // 1 step/s: a 10-step lead
        trigger.OnJobWindow(cw);
      }
    });
  }
  std::thread ticker([&] {
    while (!done) {
      trigger.Flush(&sidecars);
      (void)trigger.Decisions("job0");
      (void)trigger.counters();
    }
  });
  // An ingest thread passes the stubs' answers to whatever job0 asked last, and reads them.
  std::atomic<int> failed_calls{0};
  trigger.SetOnRankFailed([&](const std::string&) { ++failed_calls; });
  std::thread ingest([&] {
    while (!done) {
      const std::vector<CaptureDecision> ds = trigger.Decisions("job0");
      if (ds.empty() || !ds.back().asked) continue;
      for (int32_t rank : ds.back().ranks()) {
        v1::SlotHealth h;
        h.set_job("job0");
        h.set_rank(rank);
        h.set_capture_first_step(ds.back().first_step);
        h.set_capture_state(rank % 2 == 0 ? 2 : 3);  // done, failed
        trigger.OnCaptureAnswer("job0", h);
      }
      (void)trigger.Answers("job0", ds.back());
    }
  });
  for (std::thread& t : jobs) t.join();
  done = true;
  ticker.join();
  ingest.join();
  trigger.Flush(&sidecars);
  const CaptureTrigger::Counters c = trigger.counters();
  // Each window after the first finishes the previous capture and asks the next.
  CHECK(c.asked == static_cast<uint64_t>(kJobs * kWindows));
  CHECK(c.requests_sent == 2 * c.asked);  // suspect + one reference
  CHECK(sidecars.Sent().size() == c.requests_sent);
  CHECK(c.unreached == 0);
  CHECK(static_cast<uint64_t>(failed_calls.load()) == c.ranks_failed);
}

}  // namespace
}  // namespace stagefrontier
