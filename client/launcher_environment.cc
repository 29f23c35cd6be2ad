#include "client/launcher_environment.h"

#include <algorithm>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shm/record_limits.h"

namespace stagefrontier {
namespace {

// Reads the first variable of `names` that is set. Returns false in *found if none is.
absl::StatusOr<int64_t> FirstInt(const GetEnv& getenv, std::initializer_list<const char*> names,
                                 int64_t fallback) {
  for (const char* name : names) {
    const char* v = getenv(name);
    if (v == nullptr || *v == '\0') continue;
    int64_t x = 0;
    if (!absl::SimpleAtoi(v, &x) || x < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "=\"", v, "\" is not a non-negative integer"));
    }
    return x;
  }
  return fallback;
}

absl::StatusOr<int32_t> Resolve(int64_t option, const char* option_name, const GetEnv& getenv,
                                std::initializer_list<const char*> names, int64_t fallback) {
  int64_t v = option;
  if (v < 0) {
    absl::StatusOr<int64_t> env = FirstInt(getenv, names, fallback);
    if (!env.ok()) return env.status();
    v = *env;
  }
  if (v > 1 << 30) {
    return absl::InvalidArgumentError(absl::StrCat(option_name, " ", v, " is too large"));
  }
  return static_cast<int32_t>(v);
}

std::string FirstString(const std::string& option, const GetEnv& getenv,
                        std::initializer_list<const char*> names, const char* fallback) {
  if (!option.empty()) return option;
  for (const char* name : names) {
    const char* v = getenv(name);
    if (v != nullptr && *v != '\0') return v;
  }
  return fallback;
}

}  // namespace

std::string SanitizeJobId(const std::string& raw) {
  std::string out;
  for (char c : raw) {
    if (out.size() == 63) break;
    // A leading '.' would hide the journal file: the coordinator refuses such ids.
    out.push_back(shm::ValidNameChar(c) && !(out.empty() && c == '.') ? c : '_');
  }
  return out.empty() ? "local" : out;
}

absl::StatusOr<LauncherIdentity> ResolveIdentity(const ClientOptions& options,
                                                 const GetEnv& getenv) {
  LauncherIdentity id;
  id.job_id = SanitizeJobId(
      FirstString(options.job_id, getenv,
                  {"STAGEFRONTIER_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"}, "local"));
  absl::StatusOr<int32_t> rank =
      Resolve(options.rank, "rank", getenv, {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}, 0);
  if (!rank.ok()) return rank.status();
  absl::StatusOr<int32_t> local_rank =
      Resolve(options.local_rank, "local rank", getenv,
              {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, 0);
  if (!local_rank.ok()) return local_rank.status();
  absl::StatusOr<int32_t> world =
      Resolve(options.world_size, "world size", getenv,
              {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"}, 1);
  if (!world.ok()) return world.status();
  absl::StatusOr<int32_t> local_world =
      Resolve(options.local_world_size, "local world size", getenv,
              {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}, 0);  // 0: unknown
  if (!local_world.ok()) return local_world.status();
  absl::StatusOr<int32_t> ring = Resolve(options.ring_capacity, "ring capacity", getenv,
                                         {"STAGEFRONTIER_RING_CAPACITY"}, 1024);
  if (!ring.ok()) return ring.status();
  id.rank = *rank;
  id.local_rank = *local_rank;
  id.world_size = *world;
  id.local_world_size = std::max(*local_world, *local_rank + 1);
  if (id.world_size < 1 || id.rank >= id.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", id.rank, " is not below world size ", id.world_size));
  }
  // Unknown local world size (Slurm sets no plain count): at least local rank + 1.
  if (*local_world >= 1 && id.local_rank >= *local_world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "local rank ", id.local_rank, " is not below local world size ", *local_world));
  }
  const uint32_t cap = static_cast<uint32_t>(*ring);
  if (cap < 2 || cap > (1U << 20) || (cap & (cap - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring capacity ", cap, " must be a power of two in 2..1048576"));
  }
  id.ring_capacity = cap;
  id.shm_dir = FirstString(options.shm_dir, getenv, {"STAGEFRONTIER_SHM_DIR"}, "/dev/shm");
  id.shm_group = FirstString(options.shm_group, getenv, {"STAGEFRONTIER_SHM_GROUP"}, "");
  id.guard_sigbus = FirstString("", getenv, {"STAGEFRONTIER_SIGBUS_GUARD"}, "1") != "0";
  return id;
}

shm::SegmentOptions SegmentOptionsFor(const LauncherIdentity& identity) {
  shm::SegmentOptions o;
  o.dir = identity.shm_dir;
  o.job_id = identity.job_id;
  o.slot_count = static_cast<uint32_t>(std::max(identity.local_world_size, 8));
  o.ring_capacity = identity.ring_capacity;
  o.group = identity.shm_group;
  o.guard_sigbus = identity.guard_sigbus;
  return o;
}

}  // namespace stagefrontier
