#include "daemon/common/thread_name.h"

#include <pthread.h>

#include <catch2/catch.hpp>
#include <string>
#include <thread>

namespace stagefrontier {
namespace {

std::string NameOfThisThread() {
  char buf[32] = {};
  REQUIRE(pthread_getname_np(pthread_self(), buf, sizeof(buf)) == 0);
  return buf;
}

TEST_CASE("a thread's name is sf- and the duty, cut to the kernel's 15 bytes") {
  std::string set, seen;
  std::thread([&] {
    set = NameThisThread("acker");
    seen = NameOfThisThread();
  }).join();
  CHECK(set == "sf-acker");
  CHECK(seen == "sf-acker");
  std::thread([&] {
    set = NameThisThread("journal-compactor");
    seen = NameOfThisThread();
  }).join();
  CHECK(set == "sf-journal-comp");
  CHECK(seen == "sf-journal-comp");
}

}  // namespace
}  // namespace stagefrontier
