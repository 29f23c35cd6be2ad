// JobState's threading contract (run under TSan): ingest streams on several threads, the
// deadline ticker, queries and a verdict pump woken by the job's bell all at once; every step
// is accounted exactly once and the pump sees every verdict once, in order.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "daemon/coordinator/job_state.h"
#include "daemon/events/verdict_bell.h"
#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"

namespace stagefrontier {
namespace {

constexpr int kWorld = 8;
constexpr int kSteps = 400;

TEST_CASE("concurrent ingest, closing and queries account every step exactly once") {
  char dir[] = "/tmp/sf_threads_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  JobOptions o;
  o.data_dir = dir;
  o.fsync = false;
  o.engine.window_steps = 50;
  o.aligner.deadline_ns = int64_t{1} << 60;  // only complete steps close
  VerdictBell bell;
  o.observers.push_back(&bell);
  v1::RankDeclaration d;
  d.set_job("t");
  d.set_world_size(kWorld);
  for (const char* n : {"data", "sync"}) {
    v1::Stage* s = d.add_stages();
    s->set_name(n);
    s->set_kind(std::string(n) == "data" ? v1::STAGE_KIND_IO : v1::STAGE_KIND_SYNC);
  }
  auto job = JobState::Create(d, o, nullptr);
  REQUIRE(job.ok());
  JobState& j = **job;
  std::atomic<bool> stop{false};
  std::atomic<int> accepted{0};
  std::vector<std::thread> streams;
  for (int t = 0; t < 4; ++t) {
    streams.emplace_back([&, t] {
      for (int s = 0; s < kSteps; s += 5) {
        for (int r = 2 * t; r < 2 * t + 2; ++r) {
          wire::PackedStepsEncoder e(2);
          for (int k = s; k < s + 5; ++k) {
            const int64_t dur[] = {1'000'000 + (r == 3 ? 500'000 : 0), 200'000};
            e.Add(k, dur, 0);
          }
          auto c = j.Ingest(wire::MakeRankSteps("t", r, e), "n", 0);
          if (c.ok()) accepted += static_cast<int>(c->accepted);
          (void)j.Flush();
        }
      }
    });
  }
  std::thread ticker([&] {
    while (!stop) {
      j.CloseDue(0);
      (void)j.Flush();
    }
  });
  // As the verdict watchers' pump: woken by the bell, it reads the verdicts after the last seen.
  int verdicts_seen = 0;  // the pump's until it is joined (Catch2 asserts on one thread only)
  int64_t after = 0;
  bool out_of_order = false;
  std::thread pump([&] {
    uint64_t rings = 0;
    while (!stop) {
      rings = bell.WaitAfter(rings, std::chrono::milliseconds(5));
      for (const v1::VerdictEvent& ev : j.VerdictsAfter(after, 3)) {
        out_of_order |= ev.seq() != after + 1;
        after = ev.seq();
        ++verdicts_seen;
      }
    }
  });
  std::thread reader([&] {
    while (!stop) {
      v1::JobInfo info;
      j.Info(&info);
      v1::SuspectsReply sus;
      (void)j.Suspects(0, &sus);
      v1::GetHealthReply h;
      j.Health(&h);
      v1::GetStepsReply st;
      j.Steps(0, kSteps, 10, &st);
      (void)j.VerdictsAfter(0);
    }
  });
  for (auto& t : streams) t.join();
  stop = true;
  ticker.join();
  reader.join();
  pump.join();
  j.CloseDue(0);
  v1::JobInfo info;
  j.Info(&info);
  CHECK(accepted == kWorld * kSteps);
  CHECK(info.steps_accounted() == kSteps);
  CHECK(info.partial_steps() == 0);
  CHECK(j.VerdictsAfter(0).size() == kSteps / 50);
  CHECK(bell.rings() >= 1);
  for (const v1::VerdictEvent& ev : j.VerdictsAfter(after)) {
    CHECK(ev.seq() == after + 1);
    after = ev.seq();
    ++verdicts_seen;
  }
  CHECK_FALSE(out_of_order);
  CHECK(verdicts_seen == kSteps / 50);  // each once, in order
}

}  // namespace
}  // namespace stagefrontier
