#include "client/launcher_environment.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

namespace stagefrontier {
namespace {

GetEnv Env(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

TEST_CASE("torchrun's environment gives the identity") {
  auto id = ResolveIdentity({}, Env({{"RANK", "13"},
                                     {"LOCAL_RANK", "5"},
                                     {"WORLD_SIZE", "16"},
                                     {"LOCAL_WORLD_SIZE", "8"},
                                     {"TORCHELASTIC_RUN_ID", "job-7"}}));
  REQUIRE(id.ok());
  CHECK(id->rank == 13);
  CHECK(id->local_rank == 5);
  CHECK(id->world_size == 16);
  CHECK(id->local_world_size == 8);
  CHECK(id->job_id == "job-7");
  CHECK(id->shm_dir == "/dev/shm");
  CHECK(id->ring_capacity == 1024);
}

TEST_CASE("Slurm and Open MPI variables are understood; options override everything") {
  auto slurm = ResolveIdentity({}, Env({{"SLURM_PROCID", "3"},
                                        {"SLURM_LOCALID", "1"},
                                        {"SLURM_NTASKS", "4"},
                                        {"SLURM_JOB_ID", "991"}}));
  REQUIRE(slurm.ok());
  CHECK(slurm->rank == 3);
  CHECK(slurm->local_rank == 1);
  CHECK(slurm->job_id == "991");
  ClientOptions o;
  o.rank = 0;
  o.job_id = "mine";
  o.shm_dir = "/run/sf";
  auto id = ResolveIdentity(
      o, Env({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"STAGEFRONTIER_JOB_ID", "env"}}));
  REQUIRE(id.ok());
  CHECK(id->rank == 0);
  CHECK(id->job_id == "mine");
  CHECK(id->shm_dir == "/run/sf");
  CHECK(ResolveIdentity({}, Env({}))->job_id == "local");
}

TEST_CASE("job ids are mapped to the segment's alphabet") {
  CHECK(SanitizeJobId("a b/c:d") == "a_b_c_d");
  CHECK(SanitizeJobId(std::string(100, 'x')).size() == 63);
  CHECK(SanitizeJobId("") == "local");
}

TEST_CASE("bad values are named") {
  CHECK(ResolveIdentity({}, Env({{"RANK", "abc"}})).status().message() ==
        "RANK=\"abc\" is not a non-negative integer");
  CHECK(ResolveIdentity({}, Env({{"RANK", "-1"}})).status().message() ==
        "RANK=\"-1\" is not a non-negative integer");
  CHECK(ResolveIdentity({}, Env({{"RANK", "4"}, {"WORLD_SIZE", "4"}})).status().message() ==
        "rank 4 is not below world size 4");
  CHECK(ResolveIdentity({}, Env({{"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}))
            .status()
            .message() == "local rank 2 is not below local world size 2");
  CHECK(ResolveIdentity({}, Env({{"STAGEFRONTIER_RING_CAPACITY", "1000"}})).status().message() ==
        "ring capacity 1000 must be a power of two in 2..1048576");
}

}  // namespace
}  // namespace stagefrontier
