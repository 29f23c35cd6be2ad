// The job registry: jobs declare themselves (or only allowlisted ones), and a restart
// restores every journal in the data directory.
#include "daemon/coordinator/job_registry.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

namespace stagefrontier {
namespace {

v1::RankDeclaration Decl(const std::string& job, int rank) {
  v1::RankDeclaration d;
  d.set_job(job);
  d.set_rank(rank);
  d.set_world_size(4);
  for (const char* n : {"data", "grad_sync"}) {
    v1::Stage* s = d.add_stages();
    s->set_name(n);
    s->set_kind(std::string(n) == "data" ? v1::STAGE_KIND_IO : v1::STAGE_KIND_SYNC);
  }
  return d;
}

TEST_CASE("jobs declared, found, and restored after a restart (regression: restore crashed)") {
  char dir[] = "/tmp/sf_registry_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  JobOptions o;
  o.data_dir = dir;
  o.fsync = false;
  {
    JobRegistry jobs(o, nullptr, {});
    REQUIRE(jobs.RestoreAll(nullptr).ok());
    REQUIRE(jobs.Declare(Decl("a", 0)).ok());
    REQUIRE(jobs.Declare(Decl("b", 3)).ok());
    REQUIRE(jobs.Declare(Decl("a", 1)).ok());
    CHECK(jobs.All().size() == 2);
  }
  // A file that is not a journal is reported, the others restore.
  std::ofstream(std::string(dir) + "/broken.journal") << "not a journal";
  JobRegistry again(o, nullptr, {});
  std::vector<std::string> lines;
  absl::Status s = again.RestoreAll([&](const std::string& l) { lines.push_back(l); });
  CHECK(!s.ok());
  CHECK_THAT(std::string(s.message()), Catch::Contains("broken.journal"));
  REQUIRE(again.Find("a") != nullptr);
  REQUIRE(again.Find("b") != nullptr);
  CHECK(again.Find("a")->world_size() == 4);
  CHECK(again.Find("c") == nullptr);
  CHECK(lines.size() == 3);
}

TEST_CASE("an allowlist refuses other jobs with NOT_FOUND") {
  char dir[] = "/tmp/sf_registry_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  JobOptions o;
  o.data_dir = dir;
  o.fsync = false;
  JobRegistry jobs(o, nullptr, {"only"});
  CHECK(jobs.Declare(Decl("only", 0)).ok());
  auto other = jobs.Declare(Decl("other", 0));
  REQUIRE(!other.ok());
  CHECK(other.status().code() == absl::StatusCode::kNotFound);
  auto mismatch = jobs.Declare(Decl("only", 9));
  CHECK(mismatch.status().code() == absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace stagefrontier
