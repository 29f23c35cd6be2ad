// The sidecar's drainer over a real segment file: declarations before a rank's first steps,
// packed durations, read-ahead that leaves records in the ring until committed, rewind for a
// new stream, one drainer per segment, control relayed into the right slot.
#include "daemon/sidecar/segment_drainer.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <vector>

#include "daemon/wire/packed_steps.h"
#include "shm/ring_writer.h"
#include "shm/slot_ownership.h"

namespace stagefrontier {
namespace {

TEST_CASE("drain, read ahead, commit on ack, rewind, control") {
  char tmpl[] = "/tmp/sf_drainer_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  shm::SegmentOptions so;
  so.dir = dir;
  so.job_id = "jobx";
  so.slot_count = 2;
  so.ring_capacity = 16;
  auto seg = shm::MappedSegment::OpenOrCreate(so);
  REQUIRE(seg.ok());
  shm::SlotIdentity id;
  id.rank = 5;
  id.world_size = 8;
  id.local_world_size = 2;
  id.stages = {{"data", 0}, {"fwd", 1}, {"sync", 2}};
  REQUIRE(shm::ClaimSlot((*seg)->view(), 1, id).ok());
  shm::RingWriter w((*seg)->view(), 1);
  for (int s = 0; s < 10; ++s) {
    const int64_t b[] = {1000, 1000 + 10 * s, 3000, 3500};
    REQUIRE(w.TryPublish(s, 3500, 0, b, 3));
  }
  std::vector<std::string> log;
  DrainerOptions opts;
  opts.dir = dir;
  SegmentDrainer drainer(opts, [&](const std::string& l) { log.push_back(l); });
  REQUIRE(drainer.Start().ok());
  drainer.Rescan();
  REQUIRE(drainer.segment_count() == 1);

  v1::StepBatch batch;
  std::vector<CommitPoint> commits;
  REQUIRE(drainer.Drain(&batch, &commits, 4096) == 10);
  REQUIRE(batch.declarations_size() == 1);
  CHECK(batch.declarations(0).job() == "jobx");
  CHECK(batch.declarations(0).rank() == 5);
  CHECK(batch.declarations(0).world_size() == 8);
  CHECK(batch.declarations(0).local_rank() == 1);
  REQUIRE(batch.declarations(0).stages_size() == 3);
  CHECK(batch.declarations(0).stages(2).kind() == v1::STAGE_KIND_SYNC);
  REQUIRE(batch.steps_size() == 1);
  const v1::RankSteps& rs = batch.steps(0);
  CHECK(rs.count() == 10);
  std::vector<int64_t> fwd;
  REQUIRE(wire::DecodePackedSteps(rs.packed(), rs.count(), rs.base_step(), 3,
                                  [&](int64_t, const int64_t* d, uint32_t) { fwd.push_back(d[1]); })
              .ok());
  CHECK(fwd.front() == 2000);
  CHECK(fwd.back() == 2000 - 90);
  REQUIRE(commits.size() == 1);
  CHECK(commits[0].cursor == 10);

  // Read ahead: not delivered twice, and still in the ring.
  v1::StepBatch again;
  std::vector<CommitPoint> c2;
  CHECK(drainer.Drain(&again, &c2, 4096) == 0);
  CHECK((*seg)->view().slot(1).read_cursor.load() == 0);

  // A new stream re-sends everything not committed, declaring the rank again.
  drainer.Rewind();
  v1::StepBatch resend;
  c2.clear();
  CHECK(drainer.Drain(&resend, &c2, 4096) == 10);
  CHECK(resend.declarations_size() == 1);
  drainer.Commit(commits);  // the ack
  CHECK((*seg)->view().slot(1).read_cursor.load() == 10);

  // The limit is honored.
  for (int s = 10; s < 15; ++s) {
    const int64_t b[] = {0, 1, 2, 3};
    REQUIRE(w.TryPublish(s, 3, 0, b, 3));
  }
  v1::StepBatch small;
  c2.clear();
  CHECK(drainer.Drain(&small, &c2, 2) == 2);

  // A second drainer on the same directory is refused (one reader per segment).
  std::vector<std::string> log2;
  SegmentDrainer second(opts, [&](const std::string& l) { log2.push_back(l); });
  second.Rescan();
  CHECK(second.segment_count() == 0);
  REQUIRE(log2.size() == 1);
  CHECK_THAT(log2[0], Catch::Contains("not draining"));

  // Control: a trace request for rank 5 reaches slot 1; rank 6 is not on this node.
  v1::ControlRequest req;
  req.set_request_id(42);
  req.set_job("jobx");
  req.set_rank(5);
  req.set_sample_every(1);
  req.set_trace_first_step(100);
  req.set_trace_last_step(104);
  v1::ControlAck ack = drainer.ApplyControl(req);
  CHECK(ack.applied());
  uint64_t seen = 0;
  shm::ControlRequest got;
  REQUIRE(shm::PollControl((*seg)->view().slot(1), &seen, &got));
  CHECK(got.CapturesTrace(102));
  CHECK(got.request_id == 42);
  // A job-wide pause keeps the slot's trace window.
  req.set_rank(-1);
  req.set_paused(true);
  CHECK(drainer.ApplyControl(req).applied());
  REQUIRE(shm::PollControl((*seg)->view().slot(1), &seen, &got));
  CHECK(got.paused);
  CHECK(got.CapturesTrace(102));
  req.set_rank(6);
  ack = drainer.ApplyControl(req);
  CHECK(!ack.applied());
  CHECK_THAT(ack.error(), Catch::Contains("no active slot of job jobx rank 6"));

  v1::Health h;
  drainer.FillHealth(&h);
  REQUIRE(h.slots_size() == 1);
  CHECK(h.slots(0).rank() == 5);
  CHECK(h.slots(0).records_read() == 22);  // 10, the same 10 re-read after the rewind, 2
  CHECK(h.slots(0).owner() == "alive");
}

}  // namespace
}  // namespace stagefrontier
