// Mutex, MutexLock and CondVar (base/mutex.h): a waiter wakes for a notification made
// under the lock, a deadline without one returns false, and counts made under the lock add up
// across threads (run under ThreadSanitizer too).
#include "base/mutex.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

namespace stagefrontier {
namespace {

struct Box {
  Mutex mu;
  CondVar changed;
  int value ABSL_GUARDED_BY(mu) = 0;
};

TEST_CASE("a waiter sees the change it was notified of") {
  Box box;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    {
      MutexLock lock(&box.mu);
      box.value = 7;
    }
    box.changed.NotifyAll();
  });
  {
    MutexLock lock(&box.mu);
    while (box.value == 0) box.changed.Wait(&box.mu);
    CHECK(box.value == 7);
  }
  setter.join();
}

TEST_CASE("WaitUntil returns false at its deadline and keeps the lock") {
  Box box;
  MutexLock lock(&box.mu);
  const auto start = std::chrono::steady_clock::now();
  bool notified = true;
  while (notified && box.value == 0) {
    notified = box.changed.WaitUntil(&box.mu, start + std::chrono::milliseconds(30));
  }
  CHECK_FALSE(notified);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(30));
  box.value = 1;  // still held: no race for ThreadSanitizer to see
}

TEST_CASE("counts under the lock add up across threads") {
  Box box;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10'000; ++i) {
        MutexLock lock(&box.mu);
        ++box.value;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  MutexLock lock(&box.mu);
  CHECK(box.value == 40'000);
}

}  // namespace
}  // namespace stagefrontier
