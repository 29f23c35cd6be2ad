// The C++ stub end to end against a real segment file and the real reader.
#include "client/client.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "shm/monotonic_clock.h"
#include "shm/open_stage.h"
#include "shm/segment_file.h"
#include "shm/segment_layout_v1.h"
#include "shm/segment_reader.h"
#include "tests/shm/test_support.h"

// Counts every allocation of this test binary, to prove the steady state makes none. Not
// under ASan, whose own operator new the shared Catch2 library already uses.
static std::atomic<uint64_t> g_allocations{0};
#if !defined(__SANITIZE_ADDRESS__)
#define SF_COUNT_ALLOCATIONS 1
void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
#endif

namespace stagefrontier {
namespace {

using stagefrontier::testing::MakeTempDir;

const std::vector<Stage> kStages = {{"data", StageKind::kIo},
                                    {"forward", StageKind::kCompute},
                                    {"backward", StageKind::kMixed},
                                    {"optimizer", StageKind::kCompute}};

ClientOptions Options(const std::string& dir, int local_rank = 0, int64_t capacity = 64) {
  ClientOptions o;
  o.shm_dir = dir;
  o.job_id = "test";
  o.rank = local_rank;
  o.local_rank = local_rank;
  o.world_size = 4;
  o.local_world_size = 4;
  o.ring_capacity = capacity;
  o.quiet = true;
  return o;
}

const GetEnv kNoEnv = [](const char*) -> const char* { return nullptr; };
// An environment that opts in to self-tests (STAGEFRONTIER_ALLOW_SELFTEST=1), and nothing else.
const GetEnv kAllowSelfTest = [](const char* n) -> const char* {
  return std::string(n) == "STAGEFRONTIER_ALLOW_SELFTEST" ? "1" : nullptr;
};

void RunStep(Client& c) {
  c.BeginStep();
  for (Client::StageId k = 0; k < 4; ++k) {
    auto scope = c.Scope(k);
  }
  c.EndStep();
}

std::vector<shm::DrainedStep> DrainAll(const std::string& dir) {
  auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
  REQUIRE(seg.ok());
  shm::SegmentReader reader((*seg)->view());
  std::vector<shm::DrainedStep> out;
  reader.Drain([&](const shm::DrainedStep& s) { out.push_back(s); });
  return out;
}

TEST_CASE("steps recorded by the stub reach the reader with the schema and identity") {
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir, 2), kNoEnv);
  REQUIRE(c.ok());
  REQUIRE((*c)->enabled());
  CHECK((*c)->stage_id("backward") == 2);
  CHECK((*c)->stage_id("nope") == Client::kNoStage);
  for (int i = 0; i < 5; ++i) RunStep(**c);
  CHECK((*c)->stats().steps_recorded == 5);
  const auto steps = DrainAll(dir);
  REQUIRE(steps.size() == 5);
  for (size_t i = 0; i < steps.size(); ++i) {
    CHECK(steps[i].step == static_cast<int64_t>(i));
    CHECK(steps[i].rank == 2);
    CHECK(steps[i].local_rank == 2);
    CHECK(steps[i].boundaries_ns.size() == 5);
    CHECK(steps[i].flags == 0);
    CHECK(steps[i].end_ns >= steps[i].boundaries_ns.back());
  }
  c->reset();  // releases the slot
  auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
  REQUIRE(seg.ok());
  CHECK((*seg)->view().slot(2).state.load() == shm::v1::kSlotReleased);
}

TEST_CASE("the steady state allocates nothing") {
#if !defined(SF_COUNT_ALLOCATIONS)
  WARN("allocation counting is off under ASan; the plain build checks it");
#endif
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(c.ok());
  RunStep(**c);  // warm up
  const uint64_t before = g_allocations.load();
  for (int i = 0; i < 10000; ++i) RunStep(**c);  // the ring fills: drops must not allocate either
  const uint64_t after = g_allocations.load();
  CHECK(after == before);
#if defined(SF_COUNT_ALLOCATIONS)
  // The counter works: creating a client allocates.
  REQUIRE(Client::Create(kStages, Options(dir, 1), kNoEnv).ok());
  CHECK(g_allocations.load() > after);
#endif
  CHECK((*c)->stats().steps_dropped_full > 0);
}

TEST_CASE("without a usable segment the stub counts and does nothing else") {
  const std::string dir = MakeTempDir();
  SECTION("directory missing") {
    auto c = Client::Create(kStages, Options(dir + "/missing"), kNoEnv);
    REQUIRE(c.ok());
    CHECK_FALSE((*c)->enabled());
    CHECK((*c)->disabled_reason().find(dir + "/missing/stagefrontier.test.seg") !=
          std::string::npos);
    for (int i = 0; i < 3; ++i) RunStep(**c);
    CHECK((*c)->stats().steps_not_recorded == 3);
    CHECK((*c)->stats().steps_recorded == 0);
  }
  SECTION("a segment of a newer layout") {
    {
      auto first = Client::Create(kStages, Options(dir), kNoEnv);
      REQUIRE(first.ok());
    }
    const std::string path = shm::SegmentPath(dir, "test");
    std::string bytes = stagefrontier::testing::ReadFile(path);
    bytes[8] = 3;
    stagefrontier::testing::WriteFile(path, bytes);
    auto c = Client::Create(kStages, Options(dir), kNoEnv);
    REQUIRE(c.ok());
    CHECK_FALSE((*c)->enabled());
    CHECK((*c)->disabled_reason().find("layout version 3 is newer") != std::string::npos);
    RunStep(**c);
    CHECK((*c)->stats().steps_not_recorded == 1);
  }
  SECTION("another client already owns the local rank") {
    auto a = Client::Create(kStages, Options(dir), kNoEnv);
    auto b = Client::Create(kStages, Options(dir), kNoEnv);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK((*a)->enabled());
    CHECK_FALSE((*b)->enabled());
    CHECK((*b)->disabled_reason().find("already has a client in this process") !=
          std::string::npos);
  }
  SECTION("a local rank beyond the segment's slots") {
    { REQUIRE(Client::Create(kStages, Options(dir, 0), kNoEnv).ok()); }  // creates 8 slots
    ClientOptions o = Options(dir, 0);
    o.local_rank = 9;
    o.local_world_size = 10;
    o.world_size = 10;
    auto c = Client::Create(kStages, o, kNoEnv);
    REQUIRE(c.ok());
    CHECK((*c)->disabled_reason().find("local rank 9 but segment has 8 slots") !=
          std::string::npos);
  }
}

TEST_CASE("a bad schema or identity is an error at creation") {
  const std::string dir = MakeTempDir();
  CHECK(absl::IsInvalidArgument(Client::Create({}, Options(dir), kNoEnv).status()));
  CHECK(absl::IsInvalidArgument(
      Client::Create({{"a", StageKind::kIo}, {"a", StageKind::kIo}}, Options(dir), kNoEnv)
          .status()));
  CHECK(Client::Create({{std::string(40, 'x'), StageKind::kIo}}, Options(dir), kNoEnv)
            .status()
            .message()
            .find("longer than 39") != std::string::npos);
  ClientOptions o = Options(dir);
  o.rank = 7;
  CHECK(Client::Create(kStages, o, kNoEnv).status().message() ==
        "rank 7 is not below world size 4");
}

// The layout's refusal message for options with world size 8, or "" when Create succeeds.
std::string LayoutError(const std::string& dir, RankLayout layout) {
  ClientOptions o = Options(dir);
  o.world_size = 8;
  o.layout = layout;
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Create(kStages, o, kNoEnv);
  if (c.ok()) return "";
  CHECK(absl::IsInvalidArgument(c.status()));
  return std::string(c.status().message());
}

TEST_CASE("a bad rank layout is an error at creation, naming the field and its value") {
  const std::string dir = MakeTempDir();
  // (pipeline_stage, pipeline_stages, tensor_rank, tensor_size), world size 8.
  auto err = [&](int32_t ps, int32_t pss, int32_t tr, int32_t ts) {
    RankLayout l;
    l.pipeline_stage = ps;
    l.pipeline_stages = pss;
    l.tensor_rank = tr;
    l.tensor_size = ts;
    return LayoutError(dir, l);
  };
  CHECK(err(0, -1, 0, 1) == "rank layout: pipeline_stages -1 is outside 1..65535");
  CHECK(err(0, 65536, 0, 1) == "rank layout: pipeline_stages 65536 is outside 1..65535");
  CHECK(err(0, 2, 0, -2) == "rank layout: tensor_size -2 is outside 1..65535");
  CHECK(err(0, 1, 0, 70000) == "rank layout: tensor_size 70000 is outside 1..65535");
  CHECK(err(2, 2, 0, 1) == "rank layout: pipeline_stage 2 is outside 0..1 (pipeline_stages 2)");
  CHECK(err(-1, 2, 0, 1) == "rank layout: pipeline_stage -1 is outside 0..1 (pipeline_stages 2)");
  CHECK(err(0, 2, 4, 4) == "rank layout: tensor_rank 4 is outside 0..3 (tensor_size 4)");
  CHECK(err(0, 2, -1, 2) == "rank layout: tensor_rank -1 is outside 0..1 (tensor_size 2)");
  CHECK(err(0, 2, 0, 3) ==
        "rank layout: pipeline_stages 2 x tensor_size 3 = 6 does not divide world size 8");
  CHECK(err(0, 4, 0, 4) ==
        "rank layout: pipeline_stages 4 x tensor_size 4 = 16 does not divide world size 8");
  // Tensor parallelism only: pipeline_stages 0 is one stage, so a pipeline_stage 1 is outside.
  CHECK(err(1, 0, 0, 2) == "rank layout: pipeline_stage 1 is outside 0..0 (pipeline_stages 1)");
  CHECK(err(1, 0, 0, 0) ==
        "rank layout: pipeline_stage 1 and tensor_rank 0 given without pipeline_stages or "
        "tensor_size (all zero declares no layout)");
  // Good ones: none, 4 x 2 (x 1 data-parallel), 8 stages (tensor_size 0 reads as 1), 2 x 1.
  CHECK(err(0, 0, 0, 0).empty());
  CHECK(err(3, 4, 1, 2).empty());
  CHECK(err(7, 8, 0, 0).empty());
  CHECK(err(1, 2, 0, 1).empty());
}

TEST_CASE("the layout source: derived when not given, checked against the layout") {
  const std::string dir = MakeTempDir();
  auto make = [&](uint32_t source, int32_t pipeline_stages) {
    ClientOptions o = Options(dir);
    o.world_size = 8;
    o.layout.pipeline_stages = pipeline_stages;
    o.layout_source = source;
    return Client::Create(kStages, o, kNoEnv);
  };
  {
    absl::StatusOr<std::unique_ptr<Client>> c = make(0, 2);
    REQUIRE(c.ok());
    CHECK((*c)->layout_source() == shm::v1::kLayoutSourceDeclared);
  }
  {
    absl::StatusOr<std::unique_ptr<Client>> c = make(0, 0);
    REQUIRE(c.ok());
    CHECK((*c)->layout_source() == shm::v1::kLayoutSourceNone);
  }
  {
    absl::StatusOr<std::unique_ptr<Client>> c = make(shm::v1::kLayoutSourceNotInferred, 0);
    REQUIRE(c.ok());
    CHECK((*c)->layout_source() == shm::v1::kLayoutSourceNotInferred);
  }
  {
    absl::StatusOr<std::unique_ptr<Client>> c = make(shm::v1::kLayoutSourceInferred, 4);
    REQUIRE(c.ok());
    CHECK((*c)->layout_source() == shm::v1::kLayoutSourceInferred);
  }
  CHECK(make(shm::v1::kLayoutSourceInferred, 0).status().message() ==
        "rank layout: layout_source \"inferred\" needs a layout, and none is declared");
  CHECK(make(shm::v1::kLayoutSourceNoDdp, 2).status().message() ==
        "rank layout: layout_source \"no_ddp\" says none, but a layout is declared");
  CHECK(make(42, 0).status().message() == "rank layout: layout_source 42 is outside 0..9");
}

TEST_CASE("a declared rank layout is completed, written into the slot and read back") {
  const std::string dir = MakeTempDir();
  ClientOptions o = Options(dir, 1);
  o.world_size = 8;
  o.layout = RankLayout{.pipeline_stage = 1,
                        .pipeline_stages = 2,
                        .tensor_rank = 0,
                        .tensor_size = 0};  // tensor_size 0: no tensor parallelism, 1
  {
    auto c = Client::Create(kStages, o, kNoEnv);
    REQUIRE(c.ok());
    REQUIRE((*c)->enabled());
    CHECK((*c)->layout().pipeline_stages == 2);
    CHECK((*c)->layout().tensor_size == 1);
    auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
    REQUIRE(seg.ok());
    shm::SegmentReader reader((*seg)->view());
    reader.RefreshSchemas();
    const shm::SlotReport r = reader.Report(1);
    CHECK(r.layout ==
          shm::SlotLayout{
              .pipeline_stage = 1, .pipeline_stages = 2, .tensor_rank = 0, .tensor_size = 1});
    CHECK(r.invalid == 0);
  }
  // Tensor parallelism only: pipeline_stages 0 with a tensor_size is stored as one stage.
  o.layout =
      RankLayout{.pipeline_stage = 0, .pipeline_stages = 0, .tensor_rank = 3, .tensor_size = 4};
  {
    auto c = Client::Create(kStages, o, kNoEnv);
    REQUIRE(c.ok());
    CHECK((*c)->layout().pipeline_stages == 1);
    auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
    REQUIRE(seg.ok());
    shm::SegmentReader reader((*seg)->view());
    reader.RefreshSchemas();
    CHECK(reader.Report(1).layout ==
          shm::SlotLayout{
              .pipeline_stage = 0, .pipeline_stages = 1, .tensor_rank = 3, .tensor_size = 4});
  }
  // None declared: the next owner of the slot clears the previous one's layout.
  o.layout = RankLayout{};
  {
    auto c = Client::Create(kStages, o, kNoEnv);
    REQUIRE(c.ok());
    CHECK((*c)->layout().pipeline_stages == 0);
    auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
    REQUIRE(seg.ok());
    shm::SegmentReader reader((*seg)->view());
    reader.RefreshSchemas();
    CHECK_FALSE(reader.Report(1).layout.declared());
  }
}

TEST_CASE("control requests: pause, sampling and trace capture") {
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(c.ok());
  auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
  REQUIRE(seg.ok());
  shm::v1::SlotHeader& slot = (*seg)->view().slot(0);

  shm::ControlRequest pause;
  pause.paused = true;
  shm::PostControl(slot, pause);
  RunStep(**c);
  RunStep(**c);
  CHECK((*c)->stats().steps_paused == 2);
  CHECK(slot.control_applied_seq.load() == slot.control.seq.load());

  shm::ControlRequest sample;
  sample.sample_every = 2;
  sample.trace_first_step = 4;
  sample.trace_last_step = 5;
  shm::PostControl(slot, sample);
  for (int i = 0; i < 6; ++i) {  // steps 2..7
    (*c)->BeginStep();
    CHECK((*c)->should_capture_trace() == ((*c)->current_step() == 4 || (*c)->current_step() == 5));
    (*c)->EndStep();
  }
  CHECK((*c)->stats().steps_sampled_out == 3);
  CHECK((*c)->stats().steps_recorded == 3);
  CHECK((*c)->stats().control_updates == 2);
  shm::SegmentReader reader((*seg)->view());
  std::map<int64_t, uint32_t> flags;
  reader.Drain([&](const shm::DrainedStep& s) { flags[s.step] = s.flags; });
  CHECK(flags.size() == 3);
  CHECK((flags.at(4) & shm::v1::kRecordTraceCaptured) != 0);
  CHECK((flags.at(2) & shm::v1::kRecordTraceCaptured) == 0);
  // The step after the window holds the profiler's stop and export: left out of the evidence.
  CHECK((flags.at(6) & shm::v1::kRecordTraceCaptured) != 0);
}

TEST_CASE("self-test: an opted-in stub delays the stage, marks the records and answers") {
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kAllowSelfTest);
  REQUIRE(c.ok());
  CHECK((*c)->selftest_allowed());
  auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
  REQUIRE(seg.ok());
  shm::v1::SlotHeader& slot = (*seg)->view().slot(0);
  shm::ControlRequest req;
  req.selftest_stage = 1;  // forward
  req.selftest_delay_us = 20'000;
  req.selftest_first_step = 2;
  req.selftest_last_step = 3;
  shm::PostControl(slot, req);
  for (int i = 0; i < 5; ++i) RunStep(**c);  // steps 0..4
  CHECK(slot.selftest_state.load() == shm::v1::kSelfTestAccepted);
  CHECK(slot.selftest_answered_first_step.load() == 2);
  CHECK(slot.selftest_steps_done.load() == 2);
  CHECK((*c)->stats().selftest_steps == 2);
  std::map<int64_t, shm::DrainedStep> steps;
  shm::SegmentReader reader((*seg)->view());
  reader.Drain([&](const shm::DrainedStep& s) { steps[s.step] = s; });
  REQUIRE(steps.size() == 5);
  for (int64_t k = 0; k < 5; ++k) {
    const bool delayed = k == 2 || k == 3;
    CHECK(((steps[k].flags & shm::v1::kRecordSelfTestDelay) != 0) == delayed);
    const int64_t forward = steps[k].boundaries_ns[2] - steps[k].boundaries_ns[1];
    // The delay went into forward, and only there.
    if (delayed) CHECK(forward >= 20'000'000);
    if (!delayed) CHECK(forward < 20'000'000);
  }
  // A later control request repeats the same self-test fields: not answered or applied again.
  req.paused = false;
  req.sample_every = 1;
  slot.selftest_state.store(0);
  shm::PostControl(slot, req);
  RunStep(**c);
  CHECK(slot.selftest_state.load() == 0);
}

TEST_CASE("self-test: a child forked mid-step neither sleeps it nor counts it") {
  // Regression: the pending delay was copied into a child forked inside the step (a
  // DataLoader started in the data stage): its end of the stage slept and counted a self-test
  // step in the parent's slot.
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kAllowSelfTest);
  REQUIRE(c.ok());
  auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
  REQUIRE(seg.ok());
  shm::v1::SlotHeader& slot = (*seg)->view().slot(0);
  shm::ControlRequest req;
  req.selftest_stage = 0;
  req.selftest_delay_us = 300'000;
  req.selftest_first_step = 1;
  req.selftest_last_step = 1;
  shm::PostControl(slot, req);
  RunStep(**c);  // step 0: the request is accepted
  REQUIRE(slot.selftest_state.load() == shm::v1::kSelfTestAccepted);
  (*c)->BeginStep();  // step 1 owes the delay at the end of stage 0
  const pid_t child = fork();
  if (child == 0) {
    const int64_t t0 = shm::MonotonicNowNs();
    (*c)->Enter(0);
    (*c)->Exit(0);
    const int64_t slept = shm::MonotonicNowNs() - t0;
    _exit(slept < 200'000'000 && slot.selftest_steps_done.load() == 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  (*c)->Enter(0);
  (*c)->Exit(0);  // the parent still pays it
  (*c)->EndStep();
  CHECK(slot.selftest_steps_done.load() == 1);
}

TEST_CASE("self-test: refused unless the trainer opted in, and over the caps") {
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(c.ok());
  CHECK_FALSE((*c)->selftest_allowed());
  auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
  REQUIRE(seg.ok());
  shm::v1::SlotHeader& slot = (*seg)->view().slot(0);
  shm::ControlRequest req;
  req.selftest_stage = 0;
  req.selftest_delay_us = 50'000;
  req.selftest_first_step = 0;
  req.selftest_last_step = 10;
  shm::PostControl(slot, req);
  RunStep(**c);
  CHECK(slot.selftest_state.load() == shm::v1::kSelfTestNotAllowed);
  CHECK((*c)->stats().selftest_refused == 1);
  CHECK((*c)->stats().selftest_steps == 0);

  ClientOptions allowed = Options(dir, 1);
  allowed.allow_selftest = true;
  auto d = Client::Create(kStages, allowed, kNoEnv);
  REQUIRE(d.ok());
  shm::v1::SlotHeader& slot1 = (*seg)->view().slot(1);
  req.selftest_stage = 7;  // no such stage
  shm::PostControl(slot1, req);
  RunStep(**d);
  CHECK(slot1.selftest_state.load() == shm::v1::kSelfTestBadRequest);
  req.selftest_stage = 0;
  req.selftest_delay_us = Client::kMaxSelfTestDelayUs + 1;
  req.selftest_first_step = 100;
  req.selftest_last_step = 100;
  shm::PostControl(slot1, req);
  RunStep(**d);
  CHECK(slot1.selftest_state.load() == shm::v1::kSelfTestBadRequest);
  // Regression: a span whose difference overflows int64 passed the 1,000-step cap (UB; it
  // wrapped negative), delaying every step from then on.
  req.selftest_delay_us = 1'000;
  req.selftest_first_step = -(int64_t{1} << 62);
  req.selftest_last_step = (int64_t{1} << 62) + 1;
  shm::PostControl(slot1, req);
  RunStep(**d);
  CHECK(slot1.selftest_state.load() == shm::v1::kSelfTestBadRequest);
  CHECK((*d)->stats().selftest_steps == 0);
  // Zeroed control bytes (a sidecar that predates self-tests) mean no self-test.
  CHECK_FALSE(shm::ControlRequest{}.HasSelfTest());
}

namespace {
// What the capture callbacks saw, and what they should return.
struct CaptureLog {
  std::vector<std::pair<int64_t, int64_t>> begun, ended;
  int begin_result = 0;
  int end_result = 0;
  bool throw_in_end = false;
  uint64_t bytes = 0;
};
int LogBegin(void* user, int64_t first, int64_t last) {
  auto* log = static_cast<CaptureLog*>(user);
  log->begun.emplace_back(first, last);
  return log->begin_result;
}
int LogEnd(void* user, int64_t first, int64_t last, uint64_t* bytes) {
  auto* log = static_cast<CaptureLog*>(user);
  log->ended.emplace_back(first, last);
  if (log->throw_in_end) throw std::runtime_error("the profiler crashed");
  *bytes = log->bytes;
  return log->end_result;
}
Client::CaptureCallbacks Callbacks(CaptureLog* log) {
  Client::CaptureCallbacks cb;
  cb.begin = &LogBegin;
  cb.end = &LogEnd;
  cb.user = log;
  return cb;
}
shm::ControlRequest TraceWindow(int64_t first, int64_t last) {
  shm::ControlRequest req;
  req.trace_first_step = first;
  req.trace_last_step = last;
  return req;
}
}  // namespace

TEST_CASE("capture callbacks: begin and end around exactly the asked steps, answered done") {
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(c.ok());
  CaptureLog log;
  log.bytes = 4096;
  (*c)->SetCaptureCallbacks(Callbacks(&log));
  auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
  REQUIRE(seg.ok());
  shm::v1::SlotHeader& slot = (*seg)->view().slot(0);
  CHECK(slot.capture_handler.load() == 1);
  // The next owner of the slot starts without the handler and the answer of this one.
  shm::AnswerCapture(slot, 1, shm::v1::kCaptureDone, shm::v1::kCaptureFailureNone, 1);
  {
    auto next = Client::Create(kStages, Options(dir, 1), kNoEnv);
    REQUIRE(next.ok());
    shm::v1::SlotHeader& slot1 = (*seg)->view().slot(1);
    slot1.capture_handler.store(1);
    slot1.capture_state.store(shm::v1::kCaptureDone);
    next->reset();
    auto again = Client::Create(kStages, Options(dir, 1), kNoEnv);
    REQUIRE(again.ok());
    CHECK(slot1.capture_handler.load() == 0);
    CHECK(slot1.capture_state.load() == shm::v1::kCaptureNone);
  }
  slot.capture_state.store(shm::v1::kCaptureNone);
  shm::PostControl(slot, TraceWindow(3, 5));
  for (int i = 0; i < 3; ++i) RunStep(**c);  // steps 0..2: not yet
  CHECK(log.begun.empty());
  CHECK(slot.capture_state.load() == shm::v1::kCaptureNone);
  RunStep(**c);  // step 3
  REQUIRE(log.begun.size() == 1);
  CHECK(log.begun[0] == std::make_pair<int64_t, int64_t>(3, 5));
  CHECK(slot.capture_state.load() == shm::v1::kCaptureRunning);
  CHECK(slot.capture_answered_first_step.load() == 3);
  RunStep(**c);  // 4
  CHECK(log.ended.empty());
  RunStep(**c);  // 5: the window's last step ends the capture at its end
  REQUIRE(log.ended.size() == 1);
  CHECK(log.ended[0] == std::make_pair<int64_t, int64_t>(3, 5));
  CHECK(slot.capture_state.load() == shm::v1::kCaptureDone);
  CHECK(slot.capture_bytes.load() == 4096);
  for (int i = 0; i < 3; ++i) RunStep(**c);  // the same request again: not captured twice
  CHECK(log.begun.size() == 1);
  const ClientStats s = (*c)->stats();
  CHECK(s.captures_begun == 1);
  CHECK(s.captures_done == 1);
  CHECK(s.captures_failed == 0);
}

TEST_CASE("capture callbacks: failures, exceptions, late and withdrawn requests") {
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(c.ok());
  CaptureLog log;
  (*c)->SetCaptureCallbacks(Callbacks(&log));
  auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
  REQUIRE(seg.ok());
  shm::v1::SlotHeader& slot = (*seg)->view().slot(0);
  auto failure = [&] { return slot.capture_failure.load(); };

  SECTION("a begin callback that fails: answered failed, no end owed") {
    log.begin_result = -1;
    shm::PostControl(slot, TraceWindow(1, 2));
    for (int i = 0; i < 4; ++i) RunStep(**c);
    CHECK(slot.capture_state.load() == shm::v1::kCaptureFailed);
    CHECK(failure() == shm::v1::kCaptureCallbackFailed);
    CHECK(log.ended.empty());
    CHECK((*c)->stats().captures_failed == 1);
  }
  SECTION("an end callback that throws: caught, answered failed, training goes on") {
    log.throw_in_end = true;
    shm::PostControl(slot, TraceWindow(0, 0));
    RunStep(**c);
    CHECK(slot.capture_state.load() == shm::v1::kCaptureFailed);
    CHECK(failure() == shm::v1::kCaptureCallbackFailed);
    RunStep(**c);
    CHECK((*c)->stats().steps_recorded == 2);
  }
  SECTION("a request whose steps are past when it arrives: missed, no call") {
    for (int i = 0; i < 5; ++i) RunStep(**c);  // steps 0..4
    shm::PostControl(slot, TraceWindow(1, 3));
    RunStep(**c);
    CHECK(log.begun.empty());
    CHECK(slot.capture_state.load() == shm::v1::kCaptureFailed);
    CHECK(failure() == shm::v1::kCaptureMissed);
    CHECK(slot.capture_answered_first_step.load() == 1);
  }
  SECTION("a request arriving mid-window starts at the current step") {
    for (int i = 0; i < 3; ++i) RunStep(**c);  // 0..2
    shm::PostControl(slot, TraceWindow(1, 4));
    RunStep(**c);  // 3
    RunStep(**c);  // 4
    REQUIRE(log.begun.size() == 1);
    CHECK(log.begun[0] == std::make_pair<int64_t, int64_t>(3, 4));
    CHECK(log.ended[0] == std::make_pair<int64_t, int64_t>(3, 4));
    CHECK(slot.capture_answered_first_step.load() == 1);
    CHECK(slot.capture_state.load() == shm::v1::kCaptureDone);
  }
  SECTION("a withdrawn request ends the capture at the next step") {
    shm::PostControl(slot, TraceWindow(0, 100));
    RunStep(**c);  // 0
    RunStep(**c);  // 1
    shm::PostControl(slot, shm::ControlRequest{});
    RunStep(**c);  // 2: not captured
    REQUIRE(log.ended.size() == 1);
    CHECK(log.ended[0] == std::make_pair<int64_t, int64_t>(0, 1));
    CHECK(slot.capture_state.load() == shm::v1::kCaptureDone);
  }
  SECTION("a request replaced mid-capture by one that covers this step: one ends, one begins") {
    // Regression: the begin callback ran again while the first capture was running, and the
    // first window was never answered.
    shm::PostControl(slot, TraceWindow(0, 100));
    RunStep(**c);  // 0
    RunStep(**c);  // 1
    shm::PostControl(slot, TraceWindow(2, 3));
    RunStep(**c);  // 2
    REQUIRE(log.begun.size() == 2);
    REQUIRE(log.ended.size() == 1);
    CHECK(log.ended[0] == std::make_pair<int64_t, int64_t>(0, 1));
    CHECK(log.begun[1] == std::make_pair<int64_t, int64_t>(2, 3));
    RunStep(**c);  // 3
    REQUIRE(log.ended.size() == 2);
    CHECK(log.ended[1] == std::make_pair<int64_t, int64_t>(2, 3));
    CHECK(slot.capture_answered_first_step.load() == 2);
  }
  SECTION("a client destroyed mid-capture ends it") {
    shm::PostControl(slot, TraceWindow(0, 100));
    RunStep(**c);
    c->reset();
    REQUIRE(log.ended.size() == 1);
    CHECK(log.ended[0] == std::make_pair<int64_t, int64_t>(0, 0));
  }
}

TEST_CASE("capture answers from a trainer's own handler (stagefrontier.torch)") {
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(c.ok());
  auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
  REQUIRE(seg.ok());
  shm::v1::SlotHeader& slot = (*seg)->view().slot(0);
  CHECK(slot.capture_handler.load() == 0);
  // Without a handler, a late request is not answered: nobody would have captured it.
  RunStep(**c);
  RunStep(**c);
  shm::PostControl(slot, TraceWindow(0, 0));
  RunStep(**c);
  CHECK(slot.capture_state.load() == shm::v1::kCaptureNone);
  (*c)->DeclareCaptureHandler();
  CHECK(slot.capture_handler.load() == 1);  // told to the coordinator
  shm::PostControl(slot, TraceWindow(0, 1));
  RunStep(**c);
  CHECK(slot.capture_failure.load() == shm::v1::kCaptureMissed);
  // The handler's own answers go through as given.
  shm::PostControl(slot, TraceWindow(10, 12));
  (*c)->BeginStep(10);
  CHECK((*c)->capture_first_step() == 10);
  CHECK((*c)->capture_last_step() == 12);
  (*c)->AnswerCapture(10, shm::v1::kCaptureRunning);
  CHECK(slot.capture_state.load() == shm::v1::kCaptureRunning);
  (*c)->EndStep();
  (*c)->AnswerCapture(10, shm::v1::kCaptureDone, shm::v1::kCaptureFailureNone, 123);
  CHECK(slot.capture_state.load() == shm::v1::kCaptureDone);
  CHECK(slot.capture_bytes.load() == 123);
  // A finished window is not later answered "missed" over the handler's answer.
  RunStep(**c);
  RunStep(**c);
  CHECK(slot.capture_state.load() == shm::v1::kCaptureDone);
  CHECK(shm::ParseCaptureState("done") == shm::v1::kCaptureDone);
  CHECK_FALSE(shm::ParseCaptureState("finished").has_value());
  CHECK(std::string(shm::CaptureFailureName(shm::v1::kCaptureProfilerBusy)) == "busy");
  CHECK(std::string(shm::CaptureFailureName(99)) == "unknown");
}

TEST_CASE("a forked child (a DataLoader worker) does not write into the parent's ring") {
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(c.ok());
  RunStep(**c);
  const pid_t child = fork();
  if (child == 0) {
    RunStep(**c);
    RunStep(**c);
    const ClientStats s = (*c)->stats();
    c->reset();  // must not release the parent's slot
    _exit(s.steps_not_recorded == 2 && s.steps_recorded == 1 ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  RunStep(**c);
  CHECK((*c)->stats().steps_recorded == 2);
  const auto steps = DrainAll(dir);
  REQUIRE(steps.size() == 2);
  CHECK(steps[1].step == 1);
  auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
  REQUIRE(seg.ok());
  CHECK((*seg)->view().slot(0).state.load() == shm::v1::kSlotActive);
}

// What the slot says is open now (docs/segment-format.md, "Open stage").
shm::OpenStage OpenStageIn(const shm::v1::SlotHeader& slot) {
  shm::OpenStage o;
  REQUIRE(shm::ReadOpenStage(slot, &o));
  return o;
}

// The open stage the stub publishes in its slot (docs/segment-format.md, "Open stage").
TEST_CASE("the open stage follows every API style, and a forked child never publishes it") {
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(c.ok());
  auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
  REQUIRE(seg.ok());
  const shm::v1::SlotHeader& slot = (*seg)->view().slot(0);
  auto open = [&] { return OpenStageIn(slot); };
  CHECK_FALSE(open().known());  // nothing before the first step
  Client& cl = **c;
  const int64_t t0 = shm::MonotonicNowNs();
  cl.BeginStep(5);
  shm::OpenStage o = open();
  CHECK(o.in_stage());
  CHECK(o.stage() == 0);
  CHECK(o.step == 5);
  CHECK(o.since_ns >= t0);
  CHECK(o.since_ns <= shm::MonotonicNowNs());

  // Marks: after stage k ends, k + 1 is open; after the last, none (between steps).
  cl.Mark(0);
  CHECK(open().stage() == 1);
  cl.Mark(1);
  cl.Mark(2);
  CHECK(open().stage() == 3);
  const int64_t before_last = open().since_ns;
  cl.Mark(3);
  o = open();
  CHECK(o.between_steps());
  CHECK(o.step == 5);
  CHECK(o.since_ns >= before_last);
  cl.EndStep();
  CHECK(open().between_steps());

  // Scopes: Enter opens k; Exit(k) opens k + 1.
  cl.BeginStep();
  {
    auto scope = cl.Scope(2);
    o = open();
    CHECK(o.stage() == 2);
    CHECK(o.step == 6);
  }
  CHECK(open().stage() == 3);
  // Misuse publishes nothing: an unknown stage, an Exit without Enter.
  const uint64_t seq = open().seq;
  cl.Mark(99);
  cl.Exit(1);
  CHECK(open().seq == seq);
  // MarkAt: the next stage opened at the given time.
  cl.MarkAt(0, before_last + 1);
  CHECK(open().stage() == 1);
  CHECK(open().since_ns == before_last + 1);
  // ShowOpen: the stage shown open at the given time, nothing marked; not outside a step.
  cl.ShowOpen(3, before_last + 2);
  CHECK(open().stage() == 3);
  CHECK(open().since_ns == before_last + 2);
  cl.ShowOpen(99, before_last + 3);
  CHECK(open().since_ns == before_last + 2);
  cl.EndStep();
  o = open();
  CHECK(o.between_steps());
  CHECK(o.step == 6);
  const uint64_t after_end = open().seq;
  cl.ShowOpen(1, before_last + 4);
  CHECK(open().seq == after_end);

  // A forked child (a DataLoader worker) shares the slot's pages: it must not write there.
  const uint64_t parent_seq = open().seq;
  const pid_t child = fork();
  if (child == 0) {
    cl.BeginStep();
    cl.Enter(1);
    cl.Mark(2);
    cl.EndStep();
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(open().seq == parent_seq);

  // A new owner of the slot starts from "nothing published".
  cl.BeginStep();
  cl.Enter(1);
  c->reset();
  auto next = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(next.ok());
  REQUIRE((*next)->enabled());
  CHECK_FALSE(open().known());
  (*next)->BeginStep(0);
  CHECK(open().stage() == 0);
}

// docs/segment-format.md "Exit reason": a scope left by an exception keeps its stage open, and a
// trainer ending on one says so in the slot before the release; the next owner starts clean.
TEST_CASE("an uncaught exception: where it raised, and the exit reason") {
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(c.ok());
  auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
  REQUIRE(seg.ok());
  const shm::v1::SlotHeader& slot = (*seg)->view().slot(0);
  auto open = [&] { return OpenStageIn(slot); };
  Client& cl = **c;
  cl.BeginStep(4);
  try {
    auto scope = cl.Scope(2);
    throw std::runtime_error("trainer error");
  } catch (const std::runtime_error&) {
  }
  CHECK(open().stage() == 2);  // not 3: the stage did not end normally
  CHECK(cl.stats().misuse == 0);
  {
    auto scope = cl.Scope(3);  // caught, and on: the next stage is published as usual
  }
  cl.EndStep();
  CHECK(cl.stats().steps_recorded == 1);
  CHECK(slot.exit_reason.load() == shm::v1::kExitNotSaid);
  cl.BeginStep();
  cl.Enter(1);
  cl.NoteUncaughtException();
  CHECK(slot.exit_reason.load() == shm::v1::kExitException);
  c->reset();  // the release keeps the reason and the stage it was in
  CHECK(slot.state.load() == shm::v1::kSlotReleased);
  CHECK(slot.exit_reason.load() == shm::v1::kExitException);
  CHECK(open().stage() == 1);
  auto next = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(next.ok());
  CHECK(slot.exit_reason.load() == shm::v1::kExitNotSaid);
  (*next)->NoteUncaughtException(/*in_collective=*/true);  // a peer gone: the victim's reason
  CHECK(slot.exit_reason.load() == shm::v1::kExitCollectiveException);
}

TEST_CASE("step bookkeeping: explicit numbers, implicit ends, misuse") {
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(c.ok());
  (*c)->EndStep();  // no step open
  (*c)->BeginStep(100);
  (*c)->Mark(0);
  (*c)->BeginStep();  // ends step 100 implicitly
  CHECK((*c)->current_step() == 101);
  (*c)->Enter(17);  // unknown stage
  (*c)->EndStep();
  const ClientStats s = (*c)->stats();
  CHECK(s.misuse == 2);
  CHECK(s.steps_begun == 2);
  CHECK(s.steps_recorded == 2);
  const auto steps = DrainAll(dir);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].step == 100);
  CHECK((steps[0].flags & shm::v1::kRecordStageMissing) != 0);
}

}  // namespace
}  // namespace stagefrontier

namespace stagefrontier {
namespace {

// Regression (hostile input): a step number the coordinator refuses (a jump past 2^40) was
// published by the stub, accepted by the sidecar and then re-sent forever. The stub now
// refuses what the next layers would, and counts it.
TEST_CASE("steps the sidecar or coordinator would refuse are counted, not published") {
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(c.ok());
  (*c)->BeginStep(0);
  (*c)->EndStep();
  (*c)->BeginStep(shm::kMaxStepNumber + 1);
  (*c)->EndStep();
  (*c)->BeginStep(-5);
  (*c)->EndStep();
  // The extremes: refused alike, and no signed overflow on the way (UBSan under --config=asan
  // caught step + 1 and step - 1 there).
  (*c)->BeginStep(INT64_MAX);
  (*c)->EndStep();
  (*c)->BeginStep();  // the next number after INT64_MAX: saturated
  (*c)->EndStep();
  (*c)->BeginStep(INT64_MIN);
  (*c)->EndStep();
  (*c)->BeginStep(7);
  (*c)->EndStep();
  CHECK((*c)->stats().steps_invalid == 5);
  CHECK((*c)->stats().steps_recorded == 2);
  const auto got = DrainAll(dir);
  REQUIRE(got.size() == 2);
  CHECK(got[0].step == 0);
  CHECK(got[1].step == 7);
}

// Regression (hostile input): truncating the segment file killed every trainer on the node
// with SIGBUS at its next step.
TEST_CASE("a trainer survives its segment being truncated and stops recording") {
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(c.ok());
  RunStep(**c);
  REQUIRE(truncate(shm::SegmentPath(dir, "test").c_str(), 0) == 0);
  for (int i = 0; i < 5; ++i) RunStep(**c);  // the first publish faults: guarded
  CHECK_FALSE((*c)->enabled());
  CHECK_THAT((*c)->disabled_reason(), Catch::Contains("truncated while in use"));
  const ClientStats s = (*c)->stats();
  CHECK(s.steps_recorded + s.steps_not_recorded + s.steps_dropped_full == 6);
  CHECK(s.steps_not_recorded >= 4);
}

TEST_CASE("a trainer whose slot another process took over stops writing and leaves it") {
  // Regression: across PID namespaces a claimer takes a slot whose heartbeat is 60 s old (a
  // long compile, a checkpoint); the old owner kept writing the ring (two producers) and, at
  // exit, freed the new owner's slot.
  const std::string dir = MakeTempDir();
  auto c = Client::Create(kStages, Options(dir), kNoEnv);
  REQUIRE(c.ok());
  RunStep(**c);
  auto seg = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
  REQUIRE(seg.ok());
  shm::v1::SlotHeader& slot = (*seg)->view().slot(0);
  const uint32_t newcomer = static_cast<uint32_t>(getppid());
  slot.owner_pid.store(newcomer);  // what the newcomer's claim leaves
  const uint64_t written = slot.write_cursor.load();
  for (int i = 0; i < 3; ++i) RunStep(**c);
  CHECK_FALSE((*c)->enabled());
  CHECK_THAT((*c)->disabled_reason(), Catch::Contains("taken over by pid"));
  CHECK(slot.write_cursor.load() == written);  // nothing more published
  c->reset();
  CHECK(slot.owner_pid.load() == newcomer);
  CHECK(slot.state.load() == shm::v1::kSlotActive);
}

}  // namespace
}  // namespace stagefrontier
