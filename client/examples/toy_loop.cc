// A toy training loop instrumented with the C++ stub. Identity comes from the launcher's
// environment (RANK, LOCAL_RANK, ...); run it with STAGEFRONTIER_SHM_DIR pointing anywhere.
//
//   bazel run //client/examples:toy_loop_cc -- --steps 50
//   stagefrontier segment /dev/shm/stagefrontier.local.seg
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "client/client.h"

namespace {
void Work(int micros) { std::this_thread::sleep_for(std::chrono::microseconds(micros)); }
}  // namespace

int main(int argc, char** argv) {
  int steps = 20;
  int data_us = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--data-us") == 0) data_us = std::atoi(argv[i + 1]);
  }
  using stagefrontier::StageKind;
  auto client = stagefrontier::Client::Create({{"data", StageKind::kIo},
                                               {"forward", StageKind::kCompute},
                                               {"backward", StageKind::kCompute},
                                               {"grad_sync", StageKind::kSync},
                                               {"optimizer", StageKind::kCompute}});
  if (!client.ok()) {
    std::fprintf(stderr, "toy_loop: %s\n", std::string(client.status().message()).c_str());
    return 1;
  }
  stagefrontier::Client& c = **client;
  const auto data = c.stage_id("data"), forward = c.stage_id("forward"),
             backward = c.stage_id("backward"), sync = c.stage_id("grad_sync"),
             optimizer = c.stage_id("optimizer");
  for (int step = 0; step < steps; ++step) {
    c.BeginStep();
    {
      auto s = c.Scope(data);  // RAII: the stage ends with the scope
      Work(data_us);
    }
    {
      auto s = c.Scope(forward);
      Work(300);
    }
    {
      auto s = c.Scope(backward);
      Work(600);
    }
    Work(100);
    c.Mark(sync);  // explicit mark: "grad_sync ended now", covering the time since backward
    {
      auto s = c.Scope(optimizer);
      Work(100);
    }
    if (c.should_capture_trace())
      std::printf("coordinator asked for a trace of step %lld\n",
                  static_cast<long long>(c.current_step()));
    c.EndStep();
  }
  const stagefrontier::ClientStats st = c.stats();
  std::printf(
      "rank %d: %llu steps, %llu recorded, %llu dropped (ring full), %llu not recorded%s%s\n",
      c.identity().rank, static_cast<unsigned long long>(st.steps_begun),
      static_cast<unsigned long long>(st.steps_recorded),
      static_cast<unsigned long long>(st.steps_dropped_full),
      static_cast<unsigned long long>(st.steps_not_recorded), c.enabled() ? "" : ": ",
      c.disabled_reason().c_str());
  return 0;
}
