// Claiming slots: free, live owner, dead owner (real process), silent owner in another PID
// namespace, and the torn record a dead owner leaves behind.
#include "shm/slot_ownership.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <vector>

#include "shm/monotonic_clock.h"

namespace stagefrontier::shm {
namespace {

struct Buffer {
  explicit Buffer(uint32_t slots, uint32_t capacity)
      : bytes(v1::SegmentBytes(slots, capacity) / 8 + 1) {
    auto v = SegmentView::Initialize(bytes.data(), v1::SegmentBytes(slots, capacity), "t", slots,
                                     capacity);
    REQUIRE(v.ok());
    view = std::make_unique<SegmentView>(*v);
  }
  std::vector<uint64_t> bytes;
  std::unique_ptr<SegmentView> view;
};

SlotIdentity Identity() {
  SlotIdentity id;
  id.rank = 5;
  id.world_size = 16;
  id.local_world_size = 2;
  id.stages = {{"data", 0}, {"step", 1}};
  return id;
}

TEST_CASE("claiming a free slot writes identity and schema") {
  Buffer b(2, 4);
  auto claim = ClaimSlot(*b.view, 1, Identity());
  REQUIRE(claim.ok());
  CHECK(claim->generation == 1);
  CHECK_FALSE(claim->reclaimed_stale);
  const v1::SlotHeader& s = b.view->slot(1);
  CHECK(s.state.load() == v1::kSlotActive);
  CHECK(s.owner_pid.load() == static_cast<uint32_t>(getpid()));
  CHECK(s.rank == 5);
  CHECK(s.stage_count == 2);
  CHECK(std::string(s.stages[1].name) == "step");
  CHECK(JudgeOwner(s, MonotonicNowNs()) == OwnerHealth::kAlive);

  auto again = ClaimSlot(*b.view, 1, Identity());
  CHECK(absl::IsUnavailable(again.status()));
  CHECK(again.status().message() == "local rank 1 already has a client in this process");

  CHECK(ReleaseSlot(b.view->slot(1)));
  CHECK(JudgeOwner(s, MonotonicNowNs()) == OwnerHealth::kNone);
  auto third = ClaimSlot(*b.view, 1, Identity());
  REQUIRE(third.ok());
  CHECK(third->generation == 2);
  CHECK_FALSE(third->reclaimed_stale);
}

TEST_CASE("a slot taken over by another process is not released by its old owner") {
  // Regression: the old owner's clean exit stored owner 0 and `released` unconditionally,
  // freeing the slot of the process that had taken it over (across PID namespaces, after 60 s
  // without a heartbeat).
  Buffer b(2, 4);
  REQUIRE(ClaimSlot(*b.view, 1, Identity()).ok());
  v1::SlotHeader& s = b.view->slot(1);
  const uint32_t newcomer = static_cast<uint32_t>(getppid());
  s.owner_pid.store(newcomer);  // what the newcomer's claim leaves
  CHECK_FALSE(ReleaseSlot(s));
  CHECK(s.owner_pid.load() == newcomer);
  CHECK(s.state.load() == v1::kSlotActive);
}

TEST_CASE("a claim writes the rank layout at offset 56, and every claim overwrites it") {
  Buffer b(2, 4);
  SlotIdentity id = Identity();
  id.layout =
      SlotLayout{.pipeline_stage = 2, .pipeline_stages = 4, .tensor_rank = 1, .tensor_size = 2};
  REQUIRE(ClaimSlot(*b.view, 1, id).ok());
  const v1::SlotHeader& s = b.view->slot(1);
  CHECK(s.pipeline_stage == 2);
  CHECK(s.pipeline_stages == 4);
  CHECK(s.tensor_rank == 1);
  CHECK(s.tensor_size == 2);
  // The bytes as the format document has them: four little-endian u16 at 56..63.
  const auto* raw = reinterpret_cast<const uint8_t*>(&s);
  CHECK(std::vector<uint8_t>(raw + 56, raw + 64) == std::vector<uint8_t>{2, 0, 4, 0, 1, 0, 2, 0});
  // The next owner declares none: zeros, not the previous owner's layout.
  ReleaseSlot(b.view->slot(1));
  REQUIRE(ClaimSlot(*b.view, 1, Identity()).ok());
  CHECK(std::vector<uint8_t>(raw + 56, raw + 64) == std::vector<uint8_t>(8, 0));
  // Fields without pipeline_stages declare nothing: written as zeros too.
  ReleaseSlot(b.view->slot(1));
  id.layout =
      SlotLayout{.pipeline_stage = 0, .pipeline_stages = 0, .tensor_rank = 3, .tensor_size = 7};
  REQUIRE(ClaimSlot(*b.view, 1, id).ok());
  CHECK(std::vector<uint8_t>(raw + 56, raw + 64) == std::vector<uint8_t>(8, 0));
}

TEST_CASE("a claim writes the layout source at offset 1652, and every claim overwrites it") {
  Buffer b(2, 4);
  SlotIdentity id = Identity();
  id.layout =
      SlotLayout{.pipeline_stage = 1, .pipeline_stages = 2, .tensor_rank = 0, .tensor_size = 1};
  id.layout_source = v1::kLayoutSourceInferred;
  REQUIRE(ClaimSlot(*b.view, 1, id).ok());
  const auto* raw = reinterpret_cast<const uint8_t*>(&b.view->slot(1));
  CHECK(std::vector<uint8_t>(raw + 1652, raw + 1656) == std::vector<uint8_t>{4, 0, 0, 0});
  ReleaseSlot(b.view->slot(1));
  REQUIRE(ClaimSlot(*b.view, 1, Identity()).ok());  // says nothing: 0, not the previous one
  CHECK(b.view->slot(1).layout_source == v1::kLayoutSourceUnset);
  ReleaseSlot(b.view->slot(1));
  id.layout_source = v1::kLayoutSourceMax + 1;
  const absl::Status st = ClaimSlot(*b.view, 1, id).status();
  CHECK(absl::IsInvalidArgument(st));
  CHECK(st.message() == "rank layout: unknown layout source 10");
}

TEST_CASE("layout source names: one per value, and back") {
  CHECK(std::string(v1::LayoutSourceName(v1::kLayoutSourceUnset)).empty());
  CHECK(std::string(v1::LayoutSourceName(v1::kLayoutSourceNotInferred)) == "not_inferred");
  CHECK(std::string(v1::LayoutSourceName(v1::kLayoutSourceMax + 1)) == "invalid");
  CHECK(std::string(v1::LayoutSourceName(0xFFFFFFFFU)) == "invalid");
  for (uint32_t s = 0; s <= v1::kLayoutSourceMax; ++s) {
    CHECK(v1::LayoutSourceFromName(v1::LayoutSourceName(s)) == s);
  }
  CHECK(v1::LayoutSourceFromName("invalid") == v1::kLayoutSourceMax + 1);
  CHECK(v1::LayoutSourceFromName("inferred ") == v1::kLayoutSourceMax + 1);
  CHECK(v1::LayoutSourceHasLayout(v1::kLayoutSourceEnvironment));
  CHECK_FALSE(v1::LayoutSourceHasLayout(v1::kLayoutSourceDataParallelOnly));
}

TEST_CASE("an inconsistent layout is refused at claim") {
  Buffer b(2, 4);
  SlotIdentity id = Identity();
  id.layout =
      SlotLayout{.pipeline_stage = 4, .pipeline_stages = 4, .tensor_rank = 0, .tensor_size = 1};
  const absl::Status st = ClaimSlot(*b.view, 0, id).status();
  CHECK(absl::IsInvalidArgument(st));
  CHECK(st.message() == "rank layout: pipeline stage 4 of 4, tensor rank 0 of 1 is inconsistent");
  CHECK(b.view->slot(0).owner_pid.load() == 0);  // refused before taking the slot
  CHECK(ValidSlotLayout(
      {.pipeline_stage = 0, .pipeline_stages = 1, .tensor_rank = 0, .tensor_size = 1}));
  CHECK_FALSE(ValidSlotLayout({}));
  CHECK_FALSE(ValidSlotLayout(
      {.pipeline_stage = 0, .pipeline_stages = 2, .tensor_rank = 0, .tensor_size = 0}));
  CHECK_FALSE(ValidSlotLayout(
      {.pipeline_stage = 0, .pipeline_stages = 2, .tensor_rank = 2, .tensor_size = 2}));
}

TEST_CASE("claims are checked") {
  Buffer b(2, 4);
  CHECK(ClaimSlot(*b.view, 2, Identity()).status().message() ==
        "local rank 2 but segment has 2 slots");
  SlotIdentity id = Identity();
  id.stages[0].first = std::string(40, 'x');
  CHECK(absl::IsInvalidArgument(ClaimSlot(*b.view, 0, id).status()));
  id.stages.clear();
  CHECK(absl::IsInvalidArgument(ClaimSlot(*b.view, 0, id).status()));
}

TEST_CASE("a live owner in another process keeps its slot; a dead one loses it") {
  // The segment must be shared with the child: use anonymous shared memory.
  const size_t size = v1::SegmentBytes(1, 4);
  void* mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  auto view = SegmentView::Initialize(mem, size, "t", 1, 4);
  REQUIRE(view.ok());
  int go[2];
  REQUIRE(pipe(go) == 0);
  const pid_t child = fork();
  if (child == 0) {
    if (!ClaimSlot(*view, 0, Identity()).ok()) _exit(1);
    // Die mid-record: sequence number odd, cursor not advanced.
    view->record(0, 0).seq.store(1);
    char c;
    if (read(go[0], &c, 1) != 1) _exit(2);
    _exit(0);  // exits without ReleaseSlot
  }
  while (view->slot(0).state.load() != v1::kSlotActive) usleep(100);
  auto refused = ClaimSlot(*view, 0, Identity());
  CHECK(absl::IsUnavailable(refused.status()));
  CHECK(std::string(refused.status().message())
            .find("is owned by live pid " + std::to_string(child)) != std::string::npos);
  REQUIRE(write(go[1], "x", 1) == 1);
  // Exited but not reaped (a zombie): already dead (regression: kill(pid, 0) said alive).
  siginfo_t info{};
  REQUIRE(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) == 0);
  CHECK_FALSE(ProcessExists(static_cast<uint32_t>(child)));
  CHECK_FALSE(ProcessExists(0xFFFFFFFFU));  // kill(-1, 0) would answer for every process
  CHECK(ProcessExists(static_cast<uint32_t>(getpid())));
  CHECK(JudgeOwner(view->slot(0), MonotonicNowNs()) == OwnerHealth::kDead);
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(JudgeOwner(view->slot(0), MonotonicNowNs()) == OwnerHealth::kDead);
  auto taken = ClaimSlot(*view, 0, Identity());
  REQUIRE(taken.ok());
  CHECK(taken->reclaimed_stale);
  CHECK(taken->previous_owner_pid == static_cast<uint32_t>(child));
  CHECK(taken->published_torn);
  CHECK(view->slot(0).write_cursor.load() == 1);
  CHECK(view->slot(0).torn_recovered.load() == 1);
  munmap(mem, size);
}

TEST_CASE("across PID namespaces only the heartbeat tells: silent owners are reclaimed") {
  Buffer b(1, 4);
  REQUIRE(ClaimSlot(*b.view, 0, Identity()).ok());
  v1::SlotHeader& s = b.view->slot(0);
  s.owner_pid.store(999999);
  s.owner_pid_ns.store(CurrentPidNamespace() + 1);  // someone else's namespace
  s.heartbeat_ns.store(MonotonicNowNs());
  CHECK(JudgeOwner(s, MonotonicNowNs(), 1'000'000'000) == OwnerHealth::kAlive);
  CHECK(absl::IsUnavailable(ClaimSlot(*b.view, 0, Identity(), 1'000'000'000).status()));
  s.heartbeat_ns.store(MonotonicNowNs() - 2'000'000'000);
  CHECK(JudgeOwner(s, MonotonicNowNs(), 1'000'000'000) == OwnerHealth::kSilent);
  auto taken = ClaimSlot(*b.view, 0, Identity(), 1'000'000'000);
  REQUIRE(taken.ok());
  CHECK(taken->reclaimed_stale);
  CHECK_FALSE(taken->published_torn);
  CHECK(std::string(OwnerHealthName(OwnerHealth::kSilent)) == "silent");
}

// Regression (found by libFuzzer): a corrupt heartbeat made the age computation overflow.
TEST_CASE("heartbeat ages saturate whatever the shared memory holds") {
  CHECK(HeartbeatAgeNs(100, 40) == 60);
  CHECK(HeartbeatAgeNs(100, 400) == 0);
  CHECK(HeartbeatAgeNs(3671309144042, INT64_MIN + 40) == INT64_MAX);
  CHECK(HeartbeatAgeNs(INT64_MAX, INT64_MIN) == INT64_MAX);
  Buffer b(1, 4);
  REQUIRE(ClaimSlot(*b.view, 0, Identity()).ok());
  v1::SlotHeader& s = b.view->slot(0);
  s.owner_pid_ns.store(CurrentPidNamespace() + 1);
  s.heartbeat_ns.store(INT64_MIN + 40);
  CHECK(JudgeOwner(s, MonotonicNowNs()) == OwnerHealth::kSilent);
}

}  // namespace
}  // namespace stagefrontier::shm
