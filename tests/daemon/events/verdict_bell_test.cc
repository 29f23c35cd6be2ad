// The verdict bell as one of a job's observers: OnVerdictsAppended rings it, and a window alone
// (told before the verdicts are appended) does not.
#include "daemon/events/verdict_bell.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

namespace stagefrontier {
namespace {

TEST_CASE("the bell rings when verdicts were appended, and wakes a waiter") {
  VerdictBell bell;
  VerdictObserver& observer = bell;
  observer.OnJobWindow(ClosedJobWindow{});
  CHECK(bell.rings() == 0);
  std::thread waiter([&] { CHECK(bell.WaitAfter(0, std::chrono::seconds(30)) == 1); });
  observer.OnVerdictsAppended();
  waiter.join();
  CHECK(bell.rings() == 1);
  CHECK(bell.WaitAfter(1, std::chrono::milliseconds(1)) == 1);  // timed out: no new ring
}

}  // namespace
}  // namespace stagefrontier
