// A writer process for the multi-process tests: attaches to (or creates) a segment, claims a
// slot and publishes `steps` records whose contents the reader can check exactly:
// boundaries_ns[k] = 1'000'000 + step * 1000 + k * 10 (every stage lasts 10 ns).
//
//   shm_writer_process DIR JOB LOCAL_RANK STEPS [--capacity N] [--slots N] [--crash-at STEP]
//                      [--final-wait] [--stages S]
// --crash-at: SIGKILL itself halfway through writing step STEP's record.
// --final-wait: after the loop, wait for room and publish one last step (STEPS), so every
//   dropped step shows up as a gap before it.
// --pace-us N: sleep N microseconds after each step, like a (very fast) trainer.
// Prints "created C published P dropped D" on exit.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "shm/ring_writer.h"
#include "shm/segment_file.h"
#include "shm/slot_ownership.h"

namespace {
void CrashNow() { raise(SIGKILL); }
}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s DIR JOB LOCAL_RANK STEPS [flags]\n", argv[0]);
    return 2;
  }
  stagefrontier::shm::SegmentOptions o;
  o.dir = argv[1];
  o.job_id = argv[2];
  const uint32_t local_rank = static_cast<uint32_t>(std::atoi(argv[3]));
  const int64_t steps = std::atoll(argv[4]);
  int64_t crash_at = -1;
  bool final_wait = false;
  uint32_t stages = 4;
  int pace_us = 0;
  for (int i = 5; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--capacity" && i + 1 < argc)
      o.ring_capacity = std::atoi(argv[++i]);
    else if (a == "--slots" && i + 1 < argc)
      o.slot_count = std::atoi(argv[++i]);
    else if (a == "--crash-at" && i + 1 < argc)
      crash_at = std::atoll(argv[++i]);
    else if (a == "--stages" && i + 1 < argc)
      stages = std::atoi(argv[++i]);
    else if (a == "--final-wait")
      final_wait = true;
    else if (a == "--pace-us" && i + 1 < argc)
      pace_us = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  auto seg = stagefrontier::shm::MappedSegment::OpenOrCreate(o);
  if (!seg.ok()) {
    std::fprintf(stderr, "attach: %s\n", std::string(seg.status().message()).c_str());
    return 1;
  }
  stagefrontier::shm::SlotIdentity id;
  id.rank = static_cast<int32_t>(local_rank);
  id.world_size = static_cast<int32_t>((*seg)->view().slot_count());
  id.local_world_size = id.world_size;
  for (uint32_t k = 0; k < stages; ++k) id.stages.emplace_back("s" + std::to_string(k), 1);
  auto claim = stagefrontier::shm::ClaimSlot((*seg)->view(), local_rank, id);
  if (!claim.ok()) {
    std::fprintf(stderr, "claim: %s\n", std::string(claim.status().message()).c_str());
    return 1;
  }
  stagefrontier::shm::RingWriter writer((*seg)->view(), local_rank);
  int64_t b[stagefrontier::shm::v1::kMaxStages + 1];
  auto fill = [&](int64_t step) {
    for (uint32_t k = 0; k <= stages; ++k) b[k] = 1'000'000 + step * 1000 + k * 10;
  };
  uint64_t published = 0;
  for (int64_t step = 0; step < steps; ++step) {
    if (step == crash_at) stagefrontier::shm::testing::mid_record_hook.store(&CrashNow);
    fill(step);
    published += writer.TryPublish(step, b[stages], 0, b, stages) ? 1 : 0;
    if (pace_us > 0) usleep(pace_us);
  }
  if (final_wait) {
    fill(steps);
    while (!writer.HasRoom()) usleep(100);
    published += writer.TryPublish(steps, b[stages], 0, b, stages) ? 1 : 0;
  }
  stagefrontier::shm::ReleaseSlot((*seg)->view().slot(local_rank));
  std::printf("created %d published %llu dropped %llu\n", (*seg)->created() ? 1 : 0,
              static_cast<unsigned long long>(published),
              static_cast<unsigned long long>(writer.dropped()));
  return 0;
}
