// The steady state of the stub, bracketed for a system-call tracer: sets a client up, writes
// "BEGIN" to stderr, runs STEPS steps of 6 stage scopes (plus a mark), writes "END". Whatever
// the tracer sees between the two writes is a system call made by the steady state.
// No reader runs: the ring (65536 records) first takes records, then fills and the stub
// drops and counts; both paths are part of the steady state and both are traced.
//   steady_state_probe DIR [STEPS]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "client/client.h"
#include "shm/segment_file.h"

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 1000000 / 7;
  using stagefrontier::StageKind;
  stagefrontier::ClientOptions o;
  o.shm_dir = argv[1];
  o.job_id = "syscalls";
  o.rank = 0;
  o.world_size = 1;
  o.ring_capacity = 1 << 16;
  o.quiet = true;
  auto c = stagefrontier::Client::Create({{"a", StageKind::kIo},
                                          {"b", StageKind::kCompute},
                                          {"c", StageKind::kCompute},
                                          {"d", StageKind::kSync},
                                          {"e", StageKind::kCompute},
                                          {"f", StageKind::kCompute},
                                          {"g", StageKind::kSync}},
                                         o);
  if (!c.ok() || !(*c)->enabled()) return 1;
  stagefrontier::Client& client = **c;
  if (write(2, "BEGIN\n", 6) != 6) return 1;
  for (int64_t s = 0; s < steps; ++s) {
    client.BeginStep();
    for (stagefrontier::Client::StageId k = 0; k < 6; ++k) {
      auto scope = client.Scope(k);
    }
    client.Mark(6);
    client.EndStep();
  }
  if (write(2, "END\n", 4) != 4) return 1;
  const auto st = client.stats();
  std::printf("steps %llu recorded %llu dropped %llu\n",
              static_cast<unsigned long long>(st.steps_begun),
              static_cast<unsigned long long>(st.steps_recorded),
              static_cast<unsigned long long>(st.steps_dropped_full));
  return st.steps_recorded > 0 && st.steps_dropped_full > 0 ? 0 : 1;
}
