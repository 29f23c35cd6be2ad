#include "shm/control_channel.h"

#include <catch2/catch.hpp>

namespace stagefrontier::shm {
namespace {

TEST_CASE("control requests travel from the sidecar to the stub, once each") {
  v1::SlotHeader slot{};
  uint64_t seen = 0;
  ControlRequest got;
  CHECK_FALSE(PollControl(slot, &seen, &got));  // nothing posted yet

  ControlRequest req;
  req.trace_first_step = 100;
  req.trace_last_step = 109;
  req.sample_every = 4;
  req.request_id = 42;
  const uint64_t seq = PostControl(slot, req);
  CHECK(seq == 2);
  REQUIRE(PollControl(slot, &seen, &got));
  CHECK(got == req);
  CHECK(seen == 2);
  CHECK(slot.control_applied_seq.load() == 2);
  CHECK_FALSE(PollControl(slot, &seen, &got));  // unchanged: one load, no copy

  CHECK(got.CapturesTrace(100));
  CHECK(got.CapturesTrace(109));
  CHECK_FALSE(got.CapturesTrace(110));
  CHECK(got.Samples(8));
  CHECK_FALSE(got.Samples(9));

  ControlRequest pause;
  pause.paused = true;
  CHECK(PostControl(slot, pause) == 4);
  REQUIRE(PollControl(slot, &seen, &got));
  CHECK(got.paused);
  CHECK_FALSE(got.CapturesTrace(0));
}

TEST_CASE("a request caught mid-write is not applied until it is complete") {
  v1::SlotHeader slot{};
  uint64_t seen = 0;
  ControlRequest got;
  slot.control.seq.store(3);  // the sidecar is writing (or died writing)
  CHECK_FALSE(PollControl(slot, &seen, &got));
  ControlRequest req;
  req.paused = true;
  CHECK(PostControl(slot, req) == 6);  // a crashed writer's odd value is skipped past
  REQUIRE(PollControl(slot, &seen, &got));
  CHECK(got.paused);
}

}  // namespace
}  // namespace stagefrontier::shm
