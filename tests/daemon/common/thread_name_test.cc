#include "daemon/common/thread_name.h"

#include <pthread.h>

#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <utility>

namespace stagefrontier {
namespace {

std::string NameOfThisThread() {
  char buf[32] = {};
  REQUIRE(pthread_getname_np(pthread_self(), buf, sizeof(buf)) == 0);
  return buf;
}

TEST_CASE("a thread's name is sf- and the duty, cut to the kernel's 15 bytes") {
  // What NameThisThread returned, and what the kernel then says, on a new thread.
  auto named = [](const char* duty) {
    std::pair<std::string, std::string> out;
    std::thread([&] {
      out.first = NameThisThread(duty);
      out.second = NameOfThisThread();
    }).join();
    return out;
  };
  CHECK(named("acker") == std::make_pair(std::string("sf-acker"), std::string("sf-acker")));
  CHECK(named("journal-compactor") ==
        std::make_pair(std::string("sf-journal-comp"), std::string("sf-journal-comp")));
}

}  // namespace
}  // namespace stagefrontier
