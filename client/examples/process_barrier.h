// A barrier between processes of one node, over a shared file (used by the synthetic
// trainer to make its sync stages real waits). Futex-based: waiters sleep until the last
// arriver wakes them. A participant that died (its pid is gone) or finished no longer holds
// the others up, so killing one trainer does not hang the rest.
//
//   auto b = ProcessBarrier::Open("/dev/shm/demo.barrier", /*rank=*/3, /*parties=*/16);
//   for (step...) (*b)->Wait();
//   (*b)->Leave();
#ifndef STAGEFRONTIER_CLIENT_EXAMPLES_PROCESS_BARRIER_H_
#define STAGEFRONTIER_CLIENT_EXAMPLES_PROCESS_BARRIER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace stagefrontier {

class ProcessBarrier {
 public:
  static constexpr int kMaxParties = 4096;
  // Maps (creating if needed) the barrier file. InvalidArgument for bad rank/parties; the
  // errno-derived status for file errors.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<ProcessBarrier>> Open(const std::string& path,
                                                                            int rank, int parties);
  ~ProcessBarrier();

  // Waits until every live participant arrived at this generation.
  void Wait();
  // Marks this participant finished: it no longer holds anyone up.
  void Leave();

 private:
  struct Shared;
  ProcessBarrier(Shared* shared, int rank, int parties)
      : shared_(shared), rank_(rank), parties_(parties) {}
  bool AllArrived(uint32_t gen) const;

  Shared* shared_;
  int rank_;
  int parties_;
  uint32_t gen_ = 0;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_CLIENT_EXAMPLES_PROCESS_BARRIER_H_
