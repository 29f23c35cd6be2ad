// A job's journal over the record log: what it adds is the declaration. A salvaged journal holds
// the new declaration first and none of the old ones; everything else passes to the log.
#include "daemon/coordinator/job_journal.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <vector>

#include "tests/test_files.h"

namespace stagefrontier {
namespace {

using testing::TempDir;

v1::JournalRecord Declared(const std::string& job) {
  v1::JournalRecord r;
  r.mutable_declared()->set_job(job);
  return r;
}

v1::JournalRecord Closed(int64_t step) {
  v1::JournalRecord r;
  r.mutable_closed()->set_step(step);
  return r;
}

// Each record replayed, as "declared:<job>" or "closed:<step>".
std::vector<std::string> Replayed(const std::string& path) {
  std::vector<std::string> out;
  auto j = JobJournal::Open(
      path, false,
      [&](const v1::JournalRecord& r) {
        out.push_back(r.has_declared() ? "declared:" + r.declared().job()
                                       : "closed:" + std::to_string(r.closed().step()));
        return absl::OkStatus();
      },
      nullptr);
  REQUIRE(j.ok());
  return out;
}

TEST_CASE("a job journal appends, flushes and replays through its record log") {
  const std::string path = TempDir("sf_job_journal") + "/j.journal";
  auto j = JobJournal::Create(path, false, std::vector<v1::JournalRecord>{Declared("j")});
  REQUIRE(j.ok());
  CHECK((*j)->path() == path);
  (*j)->Append(Closed(1));
  CHECK((*j)->appended_bytes() > (*j)->durable_bytes());
  REQUIRE((*j)->Flush().ok());
  CHECK((*j)->durable_bytes() == (*j)->appended_bytes());
  CHECK((*j)->log().CurrentLayout().written_end == (*j)->appended_bytes());
  j->reset();
  CHECK(Replayed(path) == std::vector<std::string>{"declared:j", "closed:1"});
}

TEST_CASE("salvage puts the new declaration first and drops the old ones") {
  const std::string path = TempDir("sf_job_journal") + "/j.journal";
  REQUIRE(JobJournal::Create(path, false,
                             std::vector<v1::JournalRecord>{Declared("old"), Closed(1),
                                                            Declared("stray"), Closed(2)})
              .ok());
  JournalOpenInfo info;
  REQUIRE(JobJournal::Salvage(path, false, Declared("j"), &info).ok());
  CHECK(info.records == 3);
  CHECK(!info.kept_original.empty());
  CHECK(Replayed(path) == std::vector<std::string>{"declared:j", "closed:1", "closed:2"});
}

}  // namespace
}  // namespace stagefrontier
