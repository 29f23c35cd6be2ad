// The sidecar's drainer over a real segment file: declarations before a rank's first steps,
// packed durations, read-ahead that leaves records in the ring until committed, rewind for a
// new stream, one drainer per segment, control relayed into the right slot.
#include "daemon/sidecar/segment_drainer.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <map>
#include <vector>

#include "daemon/wire/packed_steps.h"
#include "shm/control_channel.h"
#include "shm/monotonic_clock.h"
#include "shm/open_stage.h"
#include "shm/probe_ring_writer.h"
#include "shm/ring_writer.h"
#include "shm/slot_ownership.h"
#include "tests/daemon/sidecar/test_segment.h"

namespace stagefrontier {
namespace {

TEST_CASE("drain, read ahead, commit on ack, rewind, control") {
  char tmpl[] = "/tmp/sf_drainer_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto seg = NewSegment(dir, "jobx", 2);
  REQUIRE(seg.ok());
  REQUIRE(shm::ClaimSlot((*seg)->view(), 1, ThreeStages(5, 8, 2)).ok());
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
  CHECK_FALSE(batch.declarations(0).has_layout());  // declared none: sent as before
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
  // A self-test of the same rank that sets only its own fields keeps the capture, and a
  // capture that sets only the trace window keeps the self-test.
  v1::ControlRequest selftest;
  selftest.set_job("jobx");
  selftest.set_rank(5);
  selftest.set_paused(true);
  selftest.set_sample_every(1);
  selftest.set_selftest_delay_us(1000);
  selftest.set_selftest_first_step(100);
  selftest.set_selftest_last_step(101);
  selftest.set_sets(shm::kControlSetsSelfTest);
  CHECK(drainer.ApplyControl(selftest).applied());
  REQUIRE(shm::PollControl((*seg)->view().slot(1), &seen, &got));
  CHECK(got.CapturesTrace(102));
  CHECK(got.HasSelfTest());
  v1::ControlRequest capture = req;
  capture.set_rank(5);
  capture.set_trace_first_step(200);
  capture.set_trace_last_step(204);
  capture.set_sets(shm::kControlSetsTrace);
  CHECK(drainer.ApplyControl(capture).applied());
  REQUIRE(shm::PollControl((*seg)->view().slot(1), &seen, &got));
  CHECK(got.CapturesTrace(202));
  CHECK(got.HasSelfTest());
  // Without `sets` (a coordinator that predates it) a rank-targeted request sets both.
  capture.clear_sets();
  CHECK(drainer.ApplyControl(capture).applied());
  REQUIRE(shm::PollControl((*seg)->view().slot(1), &seen, &got));
  CHECK_FALSE(got.HasSelfTest());
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
  CHECK(h.slots(0).capture_state() == 0);  // no answer: the fields stay absent
  CHECK_FALSE(h.slots(0).capture_handler());
  CHECK(h.slots(0).layout_source().empty());  // the slot says nothing
  (*seg)->view().slot(1).layout_source = shm::v1::kLayoutSourceNotInferred;
  h.Clear();
  drainer.FillHealth(&h);
  CHECK(h.slots(0).layout_source() == "not_inferred");
  (*seg)->view().slot(1).layout_source = 77;  // the trainer's bytes: any value
  h.Clear();
  drainer.FillHealth(&h);
  CHECK(h.slots(0).layout_source() == "invalid");
  (*seg)->view().slot(1).capture_handler.store(1);
  h.Clear();
  drainer.FillHealth(&h);
  CHECK(h.slots(0).capture_handler());

  // The stub's capture answer travels in the slot's health, and a change is noticed at once
  // (the streamer then reports without waiting for its interval).
  CHECK(drainer.CaptureAnswersChanged());  // the handler set above
  CHECK_FALSE(drainer.CaptureAnswersChanged());
  shm::AnswerCapture((*seg)->view().slot(1), 100, shm::v1::kCaptureDone,
                     shm::v1::kCaptureFailureNone, 5000);
  CHECK(drainer.CaptureAnswersChanged());
  CHECK_FALSE(drainer.CaptureAnswersChanged());
  (*seg)->view().slot(1).capture_handler.store(0);  // a new owner, without a handler
  CHECK(drainer.CaptureAnswersChanged());
  (*seg)->view().slot(1).capture_handler.store(1);  // it declares one: reported at once too
  CHECK(drainer.CaptureAnswersChanged());
  h.Clear();
  drainer.FillHealth(&h);
  REQUIRE(h.slots_size() == 1);
  CHECK(h.slots(0).capture_first_step() == 100);
  CHECK(h.slots(0).capture_state() == shm::v1::kCaptureDone);
  CHECK(h.slots(0).capture_bytes() == 5000);
  shm::AnswerCapture((*seg)->view().slot(1), 200, shm::v1::kCaptureFailed,
                     shm::v1::kCaptureProfilerBusy, 0);
  h.Clear();
  drainer.FillHealth(&h);
  CHECK(h.slots(0).capture_first_step() == 200);
  CHECK(h.slots(0).capture_failure() == shm::v1::kCaptureProfilerBusy);
}

TEST_CASE("a rank layout declared in the slot travels in the declaration; a bad one does not") {
  char tmpl[] = "/tmp/sf_drainer_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto seg = NewSegment(dir, "joblayout", 3);
  REQUIRE(seg.ok());
  shm::SlotIdentity id;
  id.world_size = 16;
  id.local_world_size = 3;
  id.stages = {{"fwd", 1}, {"sync", 2}};
  // Slot 0: pipeline stage 1 of 2, tensor rank 3 of 4. Slot 1: none. Slot 2: hostile bytes.
  id.rank = 7;
  id.layout = shm::SlotLayout{
      .pipeline_stage = 1, .pipeline_stages = 2, .tensor_rank = 3, .tensor_size = 4};
  REQUIRE(shm::ClaimSlot((*seg)->view(), 0, id).ok());
  id.rank = 8;
  id.layout = shm::SlotLayout{};
  REQUIRE(shm::ClaimSlot((*seg)->view(), 1, id).ok());
  id.rank = 9;
  REQUIRE(shm::ClaimSlot((*seg)->view(), 2, id).ok());
  shm::v1::SlotHeader& hostile = (*seg)->view().slot(2);
  hostile.pipeline_stage = 5;
  hostile.pipeline_stages = 2;
  hostile.tensor_rank = 0;
  hostile.tensor_size = 1;
  for (uint32_t slot = 0; slot < 3; ++slot) {
    shm::RingWriter w((*seg)->view(), slot);
    const int64_t b[] = {1000, 2000, 3000};
    REQUIRE(w.TryPublish(0, 3000, 0, b, 2));
  }
  DrainerOptions opts;
  opts.dir = dir;
  std::vector<std::string> log;
  SegmentDrainer drainer(opts, [&](const std::string& l) { log.push_back(l); });
  REQUIRE(drainer.Start().ok());
  drainer.Rescan();
  v1::StepBatch batch;
  std::vector<CommitPoint> commits;
  REQUIRE(drainer.Drain(&batch, &commits, 4096) == 3);
  REQUIRE(batch.declarations_size() == 3);
  std::map<int32_t, const v1::RankDeclaration*> by_rank;
  for (const v1::RankDeclaration& d : batch.declarations()) by_rank[d.rank()] = &d;
  REQUIRE(by_rank.size() == 3);
  REQUIRE(by_rank[7]->has_layout());
  CHECK(by_rank[7]->layout().pipeline_stage() == 1);
  CHECK(by_rank[7]->layout().pipeline_stages() == 2);
  CHECK(by_rank[7]->layout().tensor_rank() == 3);
  CHECK(by_rank[7]->layout().tensor_size() == 4);
  CHECK_FALSE(by_rank[8]->has_layout());
  CHECK_FALSE(by_rank[9]->has_layout());  // stage 5 of 2: taken as none
  CHECK(by_rank[9]->stages_size() == 2);  // the rest of the declaration is unharmed
}

TEST_CASE("health says where each live rank is: open stage, step and age; once past a limit") {
  char tmpl[] = "/tmp/sf_drainer_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto seg = NewSegment(dir, "jobo", 2);
  REQUIRE(seg.ok());
  for (uint32_t i = 0; i < 2; ++i) {
    REQUIRE(shm::ClaimSlot((*seg)->view(), i, ThreeStages(static_cast<int32_t>(i), 2, 2)).ok());
  }
  shm::v1::SlotHeader& slot0 = (*seg)->view().slot(0);
  shm::v1::SlotHeader& slot1 = (*seg)->view().slot(1);
  DrainerOptions opts;
  opts.dir = dir;
  SegmentDrainer drainer(opts);
  drainer.Rescan();
  REQUIRE(drainer.segment_count() == 1);
  // Every poll drains, which reads the slots' schemas (the stage names come from there).
  v1::StepBatch batch;
  std::vector<CommitPoint> commits;
  CHECK(drainer.Drain(&batch, &commits, 16) == 0);
  constexpr int64_t kSecond = 1'000'000'000;
  const int64_t now = shm::MonotonicNowNs();

  // Nothing published yet (a stub that predates the open stage looks the same).
  v1::Health h;
  drainer.FillHealth(&h, now);
  REQUIRE(h.slots_size() == 2);
  CHECK_FALSE(h.slots(0).open_known());
  CHECK(h.slots(0).open_stage().empty());
  CHECK_FALSE(drainer.OpenStagesPassed(kSecond, now));

  // Rank 0 is inside "sync" of step 41 since 3 s; rank 1 ended step 40 half a second ago.
  shm::OpenStageWriter w0(&slot0);
  shm::OpenStageWriter w1(&slot1);
  w0.Publish(41, now - 3 * kSecond, shm::OpenCode(2));
  w1.Publish(40, now - kSecond / 2, shm::kOpenBetweenSteps);
  h.Clear();
  drainer.FillHealth(&h, now);
  REQUIRE(h.slots_size() == 2);
  CHECK(h.slots(0).owner() == "alive");
  CHECK(h.slots(0).open_known());
  CHECK(h.slots(0).open_step() == 41);
  CHECK(h.slots(0).open_stage() == "sync");
  CHECK(h.slots(0).open_age_ns() == 3 * kSecond);
  CHECK(h.slots(1).open_known());
  CHECK(h.slots(1).open_step() == 40);
  CHECK(h.slots(1).open_stage().empty());  // between steps
  CHECK(h.slots(1).open_age_ns() == kSecond / 2);

  // Past the limit: said once per open stage.
  CHECK(drainer.OpenStagesPassed(kSecond, now));            // rank 0
  CHECK_FALSE(drainer.OpenStagesPassed(kSecond, now));      // already said
  CHECK(drainer.OpenStagesPassed(kSecond, now + kSecond));  // rank 1, now 1.5 s between steps
  CHECK_FALSE(drainer.OpenStagesPassed(kSecond, now + kSecond));
  CHECK_FALSE(drainer.OpenStagesPassed(0, now + 10 * kSecond));  // 0: never
  // Rank 0 moves on: the new stage counts afresh, once it too is old.
  w0.Publish(42, now, shm::OpenCode(0));
  CHECK_FALSE(drainer.OpenStagesPassed(kSecond, now + kSecond / 2));
  CHECK(drainer.OpenStagesPassed(kSecond, now + 2 * kSecond));

  // Untrusted bytes: a stage outside the slot's schema, a time in the future.
  w0.Publish(42, now, shm::OpenCode(7));
  w1.Publish(41, now + 5 * kSecond, shm::OpenCode(1));
  h.Clear();
  drainer.FillHealth(&h, now);
  CHECK_FALSE(h.slots(0).open_known());
  CHECK(h.slots(1).open_known());
  CHECK(h.slots(1).open_stage() == "fwd");
  CHECK(h.slots(1).open_age_ns() == 0);
  // A writer stuck mid-write (it died there): not known, and no error.
  slot1.open_seq.fetch_add(1);
  h.Clear();
  drainer.FillHealth(&h, now);
  CHECK_FALSE(h.slots(1).open_known());
  slot1.open_seq.fetch_add(1);

  // A dead owner's slot reports "dead" and the stage it died in.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  slot1.owner_pid.store(static_cast<uint32_t>(child));
  h.Clear();
  drainer.FillHealth(&h, now);
  REQUIRE(h.slots_size() == 2);
  CHECK(h.slots(1).owner() == "dead");
  CHECK(h.slots(1).open_known());
  CHECK(h.slots(1).exit_reason().empty());

  // Released cleanly: no position, no reason. Released on an uncaught exception (the stub's
  // exit_reason): the reason and the stage it raised in; a value no stub writes: "invalid".
  w0.Publish(43, now, shm::OpenCode(1));
  shm::ReleaseSlot(slot0);
  h.Clear();
  drainer.FillHealth(&h, now);
  CHECK(h.slots(0).owner() == "none");
  CHECK_FALSE(h.slots(0).open_known());
  CHECK(h.slots(0).exit_reason().empty());
  slot0.exit_reason.store(shm::v1::kExitException);
  h.Clear();
  drainer.FillHealth(&h, now);
  CHECK(h.slots(0).exit_reason() == "exception");
  CHECK(h.slots(0).open_known());
  CHECK(h.slots(0).open_step() == 43);
  CHECK(h.slots(0).open_stage() == "fwd");
  slot0.exit_reason.store(shm::v1::kExitCollectiveException);
  h.Clear();
  drainer.FillHealth(&h, now);
  CHECK(h.slots(0).exit_reason() == "collective_exception");
  slot0.exit_reason.store(77);
  h.Clear();
  drainer.FillHealth(&h, now);
  CHECK(h.slots(0).exit_reason() == "invalid");
}

// A one-slot segment (layout v2) in a fresh directory, with slot 0 claimed (stages compute,
// sync), its step ring writer and its probe ring claimed by `backend`.
struct ProbedSegment {
  explicit ProbedSegment(shm::v2::ProbeBackend backend) {
    char tmpl[] = "/tmp/sf_drainer_XXXXXX";
    dir = mkdtemp(tmpl);
    shm::SegmentOptions so;
    so.dir = dir;
    so.job_id = "jobp";
    so.slot_count = 1;
    so.ring_capacity = 16;
    so.probe_ring_capacity = 16;
    auto s = shm::MappedSegment::OpenOrCreate(so);
    REQUIRE(s.ok());
    seg = std::move(*s);
    shm::SlotIdentity id;
    id.stages = {{"compute", 1}, {"sync", 2}};
    REQUIRE(shm::ClaimSlot(seg->view(), 0, id).ok());
    w = shm::RingWriter(seg->view(), 0);
    REQUIRE(probe.Claim(seg->view(), 0, backend).ok());
  }
  std::string dir;
  std::unique_ptr<shm::MappedSegment> seg;
  shm::RingWriter w;
  shm::ProbeRingWriter probe;
};

TEST_CASE("probe intervals travel with their step; a step waits briefly for its probe") {
  ProbedSegment ps(shm::v2::kProbeBackendHostClock);
  const std::string& dir = ps.dir;
  shm::RingWriter& w = ps.w;
  shm::ProbeRingWriter& probe = ps.probe;
  // Two steps on the real clock, 1 ms each; one all-reduce in each step's sync stage, one
  // collective called between the steps (outside any step), and a third step whose
  // collective the probe has not resolved yet.
  const int64_t t0 = shm::MonotonicNowNs() - 10'000'000;
  auto publish_interval = [&](int64_t call, uint64_t seq) {
    shm::ProbeInterval p;
    p.call_ns = call;
    p.start_ns = call + 10'000;
    p.end_ns = call + 50'000;
    p.bytes = 4096;
    p.collective_seq = seq;
    p.flags = seq == 0 ? shm::v2::kProbeInGroup : 0;
    REQUIRE(probe.TryPublish(p));
  };
  for (int s = 0; s < 2; ++s) {
    const int64_t b0 = t0 + s * 2'000'000;
    const int64_t b[] = {b0, b0 + 600'000, b0 + 1'000'000};
    if (s == 1) publish_interval(t0 + 1'500'000, 9);  // between step 0 and step 1
    publish_interval(b0 + 650'000, static_cast<uint64_t>(s));
    REQUIRE(w.TryPublish(s, b[2], 0, b, 2));
  }
  probe.SetResolvedThrough(t0 + 3'900'000);
  // Step 2 ends now: the probe's watermark is behind it.
  const int64_t b2[] = {t0 + 4'000'000, t0 + 4'600'000, shm::MonotonicNowNs()};
  REQUIRE(w.TryPublish(2, b2[2], 0, b2, 2));

  DrainerOptions opts;
  opts.dir = dir;
  opts.probe_hold_ns = 60'000'000'000;  // long: the hold must be released by the watermark
  SegmentDrainer drainer(opts);
  drainer.Rescan();
  v1::StepBatch batch;
  std::vector<CommitPoint> commits;
  REQUIRE(drainer.Drain(&batch, &commits, 4096) == 2);  // step 2 is held back
  REQUIRE(batch.steps_size() == 1);
  const v1::RankSteps& rs = batch.steps(0);
  REQUIRE(rs.collectives_size() == 2);
  CHECK(rs.collectives(0).step() == 0);
  CHECK(rs.collectives(0).call_offset_ns() == 650'000);
  CHECK(rs.collectives(0).start_offset_ns() == 660'000);
  CHECK(rs.collectives(0).end_offset_ns() == 700'000);
  CHECK(rs.collectives(0).bytes() == 4096);
  CHECK(rs.collectives(0).in_group());
  CHECK(rs.collectives(1).step() == 1);
  CHECK(rs.collectives(1).collective_seq() == 1);

  // The probe resolves step 2's collective: the step goes, with it.
  publish_interval(b2[0] + 650'000, 3);
  probe.SetResolvedThrough(shm::MonotonicNowNs());
  v1::StepBatch next;
  REQUIRE(drainer.Drain(&next, &commits, 4096) == 1);
  REQUIRE(next.steps_size() == 1);
  REQUIRE(next.steps(0).collectives_size() == 1);
  CHECK(next.steps(0).collectives(0).step() == 2);
  CHECK(next.steps(0).collectives(0).collective_seq() == 3);

  v1::Health health;
  drainer.FillHealth(&health);
  REQUIRE(health.slots_size() == 1);
  CHECK(health.slots(0).probe_backend() == "host_clock");
  CHECK(health.slots(0).probe_intervals() == 3);
  CHECK(health.slots(0).probe_unmatched() == 1);  // seq 9, called between steps 0 and 1
}

TEST_CASE("a stalled probe holds a step no longer than probe_hold_ns") {
  ProbedSegment ps(shm::v2::kProbeBackendCuda);
  const std::string& dir = ps.dir;
  shm::RingWriter& w = ps.w;
  shm::ProbeRingWriter& probe = ps.probe;
  probe.SetResolvedThrough(1);  // never advances
  const int64_t now = shm::MonotonicNowNs();
  const int64_t b[] = {now - 2'000'000, now - 1'000'000, now};
  REQUIRE(w.TryPublish(0, now, 0, b, 2));
  DrainerOptions opts;
  opts.dir = dir;
  opts.probe_hold_ns = 20'000'000;
  SegmentDrainer drainer(opts);
  drainer.Rescan();
  v1::StepBatch batch;
  std::vector<CommitPoint> commits;
  CHECK(drainer.Drain(&batch, &commits, 4096) == 0);
  while (shm::MonotonicNowNs() - now < 25'000'000) {
  }
  CHECK(drainer.Drain(&batch, &commits, 4096) == 1);
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

size_t CountContaining(const std::vector<std::string>& log, const std::string& what) {
  size_t n = 0;
  for (const std::string& line : log) n += line.find(what) != std::string::npos ? 1 : 0;
  return n;
}

// Regression (hostile input): a segment truncated or overwritten under the sidecar crashed it
// (SIGBUS, SIGSEGV) or sent it to gigabytes of RSS; a damaged file was logged on every poll.
TEST_CASE("damaged segments are quarantined with one line; other segments go on") {
  char tmpl[] = "/tmp/sf_quarantine_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto make = [&](const std::string& job) {
    auto seg = NewSegment(dir, job, 2);
    REQUIRE(seg.ok());
    shm::SlotIdentity id;
    id.rank = 0;
    id.world_size = 2;
    id.stages = {{"data", 0}, {"sync", 2}};
    REQUIRE(shm::ClaimSlot((*seg)->view(), 0, id).ok());
    return *std::move(seg);
  };
  auto good = make("good");
  auto truncated = make("truncated");
  auto scribbled = make("scribbled");
  std::vector<std::string> log;
  DrainerOptions opts;
  opts.dir = dir;
  SegmentDrainer drainer(opts, [&](const std::string& l) { log.push_back(l); });
  drainer.Rescan();
  REQUIRE(drainer.segment_count() == 3);

  REQUIRE(truncate(truncated->path().c_str(), 100) == 0);
  shm::v1::SegmentHeader& h = const_cast<shm::v1::SegmentHeader&>(scribbled->view().header());
  h.slot_count = 0xFFFFFFFFu;  // the sidecar would have allocated 32 GB for it
  // A file that never was a segment, and a symbolic link: refused, said once each.
  {
    FILE* f = std::fopen((dir + "/stagefrontier.garbage.seg").c_str(), "w");
    std::fputs("not a segment at all", f);
    std::fclose(f);
  }
  REQUIRE(symlink(good->path().c_str(), (dir + "/stagefrontier.link.seg").c_str()) == 0);
  // Regression: a segment named for one job whose header names another was drained as that
  // other job's (a user's trainer speaking for someone else's job).
  {
    auto other = NewSegment(dir, "theirs", 2);
    REQUIRE(other.ok());
  }
  REQUIRE(rename((dir + "/stagefrontier.theirs.seg").c_str(),
                 (dir + "/stagefrontier.mine.seg").c_str()) == 0);
  for (int i = 0; i < 5; ++i) drainer.Rescan();
  CHECK(CountContaining(log,
                        "stagefrontier.mine.seg: its header names job \"theirs\", not the "
                        "job of its file name") == 1);
  // Refusals are remembered per file name while the file is there, not after.
  CHECK(drainer.refused_count() == 3);  // garbage, link, mine
  REQUIRE(unlink((dir + "/stagefrontier.mine.seg").c_str()) == 0);
  drainer.Rescan();
  CHECK(drainer.refused_count() == 2);
  CHECK(drainer.segment_count() == 1);
  CHECK(drainer.quarantined() == 2);
  CHECK(CountContaining(log, "quarantined segment of job truncated: segment") == 1);
  CHECK(CountContaining(
            log, "moved aside to " + dir + "/stagefrontier.truncated.seg.quarantined-") == 1);
  CHECK(CountContaining(log, "quarantined segment of job scribbled") == 1);
  CHECK(CountContaining(log, "header overwritten") == 1);
  CHECK(CountContaining(log, "stagefrontier.garbage.seg: ") == 1);
  CHECK(CountContaining(log, "symbolic link") == 1);

  // The good segment still drains.
  shm::RingWriter w(good->view(), 0);
  const int64_t b[] = {0, 5, 9};
  REQUIRE(w.TryPublish(0, 9, 0, b, 2));
  v1::StepBatch batch;
  std::vector<CommitPoint> commits;
  CHECK(drainer.Drain(&batch, &commits, 100) == 1);
  drainer.Commit(commits);
  v1::Health health;
  drainer.FillHealth(&health);
  CHECK(health.slots_size() == 1);

  // A new file at a quarantined path is attached afresh.
  truncated.reset();
  auto fresh = make("truncated");
  drainer.Rescan();
  CHECK(drainer.segment_count() == 2);
}

// The reader's per-record errors are all counted, but one line per slot per interval is logged.
TEST_CASE("a flood of bad records is counted, not logged line by line") {
  char tmpl[] = "/tmp/sf_flood_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  shm::SegmentOptions so;
  so.dir = dir;
  so.job_id = "flood";
  so.slot_count = 1;
  so.ring_capacity = 64;
  auto seg = shm::MappedSegment::OpenOrCreate(so);
  REQUIRE(seg.ok());
  shm::SlotIdentity id;
  id.stages = {{"a", 0}, {"b", 2}};
  REQUIRE(shm::ClaimSlot((*seg)->view(), 0, id).ok());
  shm::RingWriter w((*seg)->view(), 0);
  for (int s = 0; s < 50; ++s) {
    const int64_t b[] = {10, 5, 20};  // stage a ends before it starts
    REQUIRE(w.TryPublish(s, 20, 0, b, 2));
  }
  std::vector<std::string> log;
  DrainerOptions opts;
  opts.dir = dir;
  SegmentDrainer drainer(opts, [&](const std::string& l) { log.push_back(l); });
  drainer.Rescan();
  v1::StepBatch batch;
  std::vector<CommitPoint> commits;
  CHECK(drainer.Drain(&batch, &commits, 100) == 0);
  CHECK(drainer.reader_errors() == 50);
  CHECK(CountContaining(log, "ends before it starts") == 1);
}

int g_dump_fd = -1;  // in the child below: where its SIGUSR2 handler writes
void OnDumpSignal(int) {
  const char c = 'D';
  (void)!::write(g_dump_fd, &c, 1);
}

TEST_CASE("a stack dump stores the capture id and signals only an owner that checks out") {
  char tmpl[] = "/tmp/sf_drainer_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto seg = NewSegment(dir, "dumps", 2);
  REQUIRE(seg.ok());
  shm::SlotIdentity id;
  id.world_size = 8;
  id.local_world_size = 2;
  id.stages = {{"a", 0}};
  id.rank = 3;
  REQUIRE(shm::ClaimSlot((*seg)->view(), 0, id).ok());
  id.rank = 4;
  REQUIRE(shm::ClaimSlot((*seg)->view(), 1, id).ok());
  shm::v1::SlotHeader& slot3 = (*seg)->view().slot(0);
  shm::v1::SlotHeader& slot4 = (*seg)->view().slot(1);
  std::vector<std::string> log;
  DrainerOptions opts;
  opts.dir = dir;
  SegmentDrainer drainer(opts, [&](const std::string& l) { log.push_back(l); });
  drainer.Rescan();
  REQUIRE(drainer.segment_count() == 1);

  // The trainer of rank 3 has no dump handler: the id is stored, nothing is signalled, the
  // control block is left alone, and the ack says why.
  v1::ControlRequest req;
  req.set_job("dumps");
  req.set_rank(3);
  req.set_request_id(7);
  req.set_sets(shm::kControlSetsStacks);
  req.set_stacks_capture_id(77);
  v1::ControlAck ack = drainer.ApplyControl(req);
  CHECK_FALSE(ack.applied());
  CHECK(ack.error() == "rank 3: not signalled: its trainer names no dump signal (no dump handler)");
  CHECK(slot3.dump_request_id.load() == 77);
  uint64_t seen = 0;
  shm::ControlRequest got;
  CHECK_FALSE(shm::PollControl(slot3, &seen, &got));
  CHECK(drainer.stack_dumps_refused() == 1);
  CHECK(drainer.stack_dumps_signalled() == 0);
  CHECK(CountContaining(log, "stack dump 77 not signalled") == 1);
  // Asked again at once: no second attempt within 2 s, and the newer id is not stored (a dump
  // the last attempt started would be filed under it, the older capture getting no file).
  slot3.dump_signal.store(SIGUSR2);
  req.set_stacks_capture_id(78);
  ack = drainer.ApplyControl(req);
  CHECK_FALSE(ack.applied());
  CHECK_THAT(ack.error(), Catch::Contains("rank 3: not signalled: a stack dump was asked of it "
                                          "less than 2 s ago"));
  CHECK(slot3.dump_request_id.load() == 77);
  CHECK(drainer.stack_dumps_refused() == 2);
  CHECK(CountContaining(log, "stack dump 78") == 0);
  // A rank with no slot here.
  req.set_rank(5);
  ack = drainer.ApplyControl(req);
  CHECK_FALSE(ack.applied());
  CHECK_THAT(ack.error(), Catch::Contains("no active slot of job dumps rank 5"));

  // Rank 4's owner: a child that catches SIGUSR2, its dump signal. A
  // request that also sets a trace window posts that too.
  int pipes[2];
  REQUIRE(::pipe(pipes) == 0);
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    g_dump_fd = pipes[1];
    signal(SIGUSR2, OnDumpSignal);
    const char c = 'R';
    (void)!::write(ready[1], &c, 1);
    for (;;) ::pause();
  }
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  slot4.owner_pid.store(static_cast<uint32_t>(child));
  slot4.dump_signal.store(SIGUSR2);
  req.set_rank(4);
  req.set_stacks_capture_id(90);
  req.set_sets(shm::kControlSetsStacks | shm::kControlSetsTrace);
  req.set_trace_first_step(10);
  req.set_trace_last_step(12);
  ack = drainer.ApplyControl(req);
  INFO(ack.error());
  CHECK(ack.applied());
  CHECK(ack.error().empty());
  CHECK(slot4.dump_request_id.load() == 90);
  pollfd p{pipes[0], POLLIN, 0};
  REQUIRE(::poll(&p, 1, 2000) == 1);
  REQUIRE(::read(pipes[0], &c, 1) == 1);
  CHECK(c == 'D');
  seen = 0;
  REQUIRE(shm::PollControl(slot4, &seen, &got));
  CHECK(got.CapturesTrace(11));
  CHECK(drainer.stack_dumps_signalled() == 1);
  CHECK(CountContaining(log, "stack dump 90 asked of pid") == 1);
  // Rank 3's slot kept its control block through all of this.
  seen = 0;
  CHECK_FALSE(shm::PollControl(slot3, &seen, &got));
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

}  // namespace
}  // namespace stagefrontier
