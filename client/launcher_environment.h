// Who this process is: job id, rank, local rank, world sizes and where the segment lives,
// read from what the launchers already set (torchrun, Slurm, mpirun), each overridable.
//
//   Job id:      options, else STAGEFRONTIER_JOB_ID, TORCHELASTIC_RUN_ID, SLURM_JOB_ID, "local"
//   Rank:        options, else RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, 0
//   Local rank:  options, else LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, 0
//   World size:  options, else WORLD_SIZE, OMPI_COMM_WORLD_SIZE, SLURM_NTASKS, 1
//   Local world: options, else LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE, local rank + 1
//   Segment dir: options, else STAGEFRONTIER_SHM_DIR, /dev/shm
//   Group:       options, else STAGEFRONTIER_SHM_GROUP, none (mode 0600)
//   Ring:        options, else STAGEFRONTIER_RING_CAPACITY, 1024 records
//
//   absl::StatusOr<LauncherIdentity> id = ResolveIdentity(ClientOptions{}, ::getenv);
#ifndef STAGEFRONTIER_CLIENT_LAUNCHER_ENVIRONMENT_H_
#define STAGEFRONTIER_CLIENT_LAUNCHER_ENVIRONMENT_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "shm/segment_file.h"

namespace stagefrontier {

// Where this rank sits in a 3D-parallel (pipeline x tensor x data-parallel) job, declared once
// at Create and sent to the coordinator with the rank's declaration. All zero: none declared
// (the job is one sync group). pipeline_stages 0 with tensor_size >= 1 declares tensor
// parallelism only (one pipeline stage); tensor_size 0 with pipeline_stages >= 1 means 1.
// Client::Create checks 0 <= pipeline_stage < pipeline_stages <= 65535,
// 0 <= tensor_rank < tensor_size <= 65535, and that pipeline_stages * tensor_size divides the
// world size.
struct RankLayout {
  int32_t pipeline_stage = 0;
  int32_t pipeline_stages = 0;
  int32_t tensor_rank = 0;
  int32_t tensor_size = 0;
};

// What the caller may set explicitly; empty strings and negative numbers mean "from the
// environment".
struct ClientOptions {
  std::string job_id;
  int32_t rank = -1;
  int32_t local_rank = -1;
  int32_t world_size = -1;
  int32_t local_world_size = -1;
  std::string shm_dir;
  std::string shm_group;
  int64_t ring_capacity = -1;
  bool quiet = false;  // do not log why recording is disabled
  // Obey self-test requests (sfctl selftest). Also set by STAGEFRONTIER_ALLOW_SELFTEST=1.
  bool allow_selftest = false;
  // The rank's 3D-parallel layout (no environment variable; default: none declared).
  RankLayout layout;
  // How the caller came by it, or why it declares none: a shm::v1::LayoutSource value, shown
  // by `sfctl health` (stagefrontier.torch says what it could not infer). 0: "declared" with
  // a layout, "none" without.
  uint32_t layout_source = 0;
};

struct LauncherIdentity {
  std::string job_id;  // sanitized: [A-Za-z0-9_.-], at most 63 characters
  int32_t rank = 0;
  int32_t local_rank = 0;
  int32_t world_size = 1;
  int32_t local_world_size = 1;
  std::string shm_dir;
  std::string shm_group;
  uint32_t ring_capacity = 1024;
  // Survive a truncated segment file (shm/mapping_guard.h); STAGEFRONTIER_SIGBUS_GUARD=0
  // turns it off for trainers that must own SIGBUS.
  bool guard_sigbus = true;
};

using GetEnv = std::function<const char*(const char*)>;

// Resolves the identity. Fails with InvalidArgument naming the variable or option when a
// value is not an integer, negative, or inconsistent (rank >= world size, local rank >=
// local world size, a ring capacity that is not a power of two in 2..1048576).
[[nodiscard]] absl::StatusOr<LauncherIdentity> ResolveIdentity(const ClientOptions& options,
                                                               const GetEnv& getenv);

// The segment every process of this identity's node shares (the stub and the probe open or
// create the same one): one slot per local rank, at least 8, so that a missing
// LOCAL_WORLD_SIZE on the first process to start is forgiven.
shm::SegmentOptions SegmentOptionsFor(const LauncherIdentity& identity);

// Maps any job id to the segment's alphabet: other characters become '_', at most 63 kept.
std::string SanitizeJobId(const std::string& raw);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_CLIENT_LAUNCHER_ENVIRONMENT_H_
