// PeriodicTasks: duties run in the order added, each at its own period (first at once), and
// the thread stops promptly.
#include "daemon/common/periodic_tasks.h"

#include <pthread.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

namespace stagefrontier {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST_CASE("each duty runs at its own period, in the order added") {
  PeriodicTasks tasks("test");
  std::vector<std::string> ran;
  tasks.Add("every-tick", nanoseconds(0), [&](int64_t) { ran.push_back("tick"); });
  tasks.Add("every-second", seconds(1), [&](int64_t) { ran.push_back("second"); });
  tasks.Add("every-minute", seconds(60), [&](int64_t) { ran.push_back("minute"); });
  CHECK(tasks.TaskNames() ==
        std::vector<std::string>{"every-tick", "every-second", "every-minute"});
  const int64_t t0 = 5'000'000'000;
  tasks.RunDue(t0);  // everything runs at the first tick
  CHECK(ran == std::vector<std::string>{"tick", "second", "minute"});
  ran.clear();
  tasks.RunDue(t0 + 500'000'000);
  CHECK(ran == std::vector<std::string>{"tick"});
  ran.clear();
  tasks.RunDue(t0 + 1'000'000'000);
  CHECK(ran == std::vector<std::string>{"tick", "second"});
  ran.clear();
  tasks.RunDue(t0 + 1'500'000'000);  // a second since the last run, not since the first
  CHECK(ran == std::vector<std::string>{"tick"});
  ran.clear();
  tasks.RunDue(t0 + 60'000'000'000);
  CHECK(ran == std::vector<std::string>{"tick", "second", "minute"});
}

TEST_CASE("a duty gets the tick's time") {
  PeriodicTasks tasks("test");
  int64_t seen = -1;
  tasks.Add("t", nanoseconds(0), [&](int64_t now) { seen = now; });
  tasks.RunDue(42);
  CHECK(seen == 42);
}

TEST_CASE("the thread ticks until Stop, which returns promptly") {
  std::atomic<int64_t> clock{0};
  PeriodicTasks tasks("test", milliseconds(1), [&] { return clock += 1'000'000; });
  std::atomic<int> ticks{0};
  std::atomic<int> slow{0};
  tasks.Add("tick", nanoseconds(0), [&](int64_t) { ++ticks; });
  tasks.Add("slow", seconds(3600), [&](int64_t) { ++slow; });
  std::string thread_name;  // written by the duty before Stop() joins
  tasks.Add("name", seconds(3600), [&](int64_t) {
    char buf[32] = {};
    pthread_getname_np(pthread_self(), buf, sizeof(buf));
    thread_name = buf;
  });
  tasks.Start();
  for (int i = 0; i < 2000 && ticks < 5; ++i) std::this_thread::sleep_for(milliseconds(1));
  const auto before = std::chrono::steady_clock::now();
  tasks.Stop();
  CHECK(std::chrono::steady_clock::now() - before < seconds(1));
  CHECK(ticks >= 5);
  CHECK(slow == 1);
  CHECK(thread_name == "sf-test");  // top and perf say whose thread it is
  CHECK(tasks.stopping());
  tasks.Stop();  // twice is fine
}

TEST_CASE("Stop without Start is fine") {
  PeriodicTasks tasks("test");
  tasks.Stop();
  CHECK(tasks.stopping());
}

}  // namespace
}  // namespace stagefrontier
