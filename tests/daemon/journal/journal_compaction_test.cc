#include "daemon/journal/journal_compaction.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "daemon/journal/journal_reader.h"
#include "daemon/journal/record_log.h"
#include "daemon/wire/rank_steps.h"
#include "tests/test_files.h"

namespace stagefrontier {
namespace {

using testing::ReadAll;
using testing::TempDir;

std::vector<std::string> Records(const std::string& path) {
  std::vector<std::string> out;
  const JournalScan scan = ScanJournal(ReadAll(path), [&](const v1::JournalRecord& r) {
    out.push_back(r.SerializeAsString());
    return absl::OkStatus();
  });
  REQUIRE(scan.error.empty());
  REQUIRE(scan.skipped.empty());
  return out;
}

// A job of 8 ranks and 3 stages: 250 steps, one batch per rank and step, then the close.
std::vector<v1::JournalRecord> Job() {
  std::vector<v1::JournalRecord> records(1);
  v1::JobDeclared* d = records[0].mutable_declared();
  d->set_job("job1");
  d->set_world_size(8);
  for (const char* name : {"data", "compute", "sync"}) d->add_stages()->set_name(name);
  for (int64_t step = 0; step < 250; ++step) {
    v1::JournalRecord r;
    for (int rank = 0; rank < 8; ++rank) {
      wire::PackedStepsEncoder enc(3);
      const int64_t dur[3] = {1'000'000 + 37 * ((step * 7 + rank) % 11), 20'000'000 + rank,
                              3'000'000 + 101 * (step % 5)};
      enc.Add(step, dur, 0);
      *r.mutable_ranks()->add_steps() = wire::MakeRankSteps("job1", rank, enc);
    }
    records.push_back(r);
    records.emplace_back().mutable_closed()->set_step(step);
  }
  return records;
}

TEST_CASE("a compacted journal holds the same records, in blocks, several times smaller") {
  const std::string dir = TempDir("sf_compact");
  REQUIRE(RecordLog::Create(dir + "/job1.journal", false, Job()).ok());
  auto r = CompactJournal(dir + "/job1.journal", dir + "/small.journal",
                          {.block_steps = 100, .fsync = false});
  REQUIRE(r.ok());
  CHECK(r->job == "job1");
  CHECK(r->stages == 3);
  CHECK(r->blocks == 3);  // 100 + 100 + 50 closed steps
  CHECK(r->totals.records == 500);
  CHECK(r->totals.whole_records == 0);
  CHECK(r->totals.rank_stage_steps == 250 * 8 * 3);
  CHECK(r->input_bytes == ReadAll(dir + "/job1.journal").size());
  CHECK(r->output_bytes == ReadAll(dir + "/small.journal").size());
  CHECK(r->output_bytes * 4 < r->input_bytes);
  CHECK(Records(dir + "/small.journal") == Records(dir + "/job1.journal"));

  // Compacting a compacted journal reads its blocks and writes the same records again.
  auto again = CompactJournal(dir + "/small.journal", dir + "/again.journal",
                              {.block_steps = 7, .fsync = false});
  REQUIRE(again.ok());
  CHECK(again->blocks == 36);
  CHECK(Records(dir + "/again.journal") == Records(dir + "/job1.journal"));
}

TEST_CASE("a microsecond archive is smaller and reads back within half a microsecond") {
  const std::string dir = TempDir("sf_compact");
  REQUIRE(RecordLog::Create(dir + "/job1.journal", false, Job()).ok());
  auto exact = CompactJournal(dir + "/job1.journal", dir + "/exact.journal", {.fsync = false});
  auto us = CompactJournal(dir + "/job1.journal", dir + "/us.journal",
                           {.duration_unit_ns = 1000, .fsync = false});
  REQUIRE(exact.ok());
  REQUIRE(us.ok());  // its own read-back comparison passed
  CHECK(us->output_bytes < exact->output_bytes);
  CHECK(Records(dir + "/us.journal").size() == Records(dir + "/job1.journal").size());
  CHECK(Records(dir + "/us.journal") != Records(dir + "/job1.journal"));
}

TEST_CASE("what cannot be compacted is refused with the reason, and nothing is written") {
  const std::string dir = TempDir("sf_compact");
  REQUIRE(RecordLog::Create(dir + "/job1.journal", false, Job()).ok());
  const CompactionOptions o{.fsync = false};

  auto missing = CompactJournal(dir + "/nope.journal", dir + "/out.journal", o);
  CHECK(absl::IsNotFound(missing.status()));

  std::ofstream(dir + "/notes.txt") << "not a journal at all\n";
  auto notes = CompactJournal(dir + "/notes.txt", dir + "/out.journal", o);
  CHECK(absl::IsFailedPrecondition(notes.status()));

  std::string damaged = ReadAll(dir + "/job1.journal");
  damaged[damaged.size() / 2] ^= 0x5a;
  std::ofstream(dir + "/damaged.journal", std::ios::binary) << damaged;
  auto d = CompactJournal(dir + "/damaged.journal", dir + "/out.journal", o);
  CHECK(absl::IsFailedPrecondition(d.status()));
  CHECK_THAT(std::string(d.status().message()), Catch::Contains("damaged bytes"));
  CHECK_THAT(std::string(d.status().message()), Catch::Contains("repair it"));

  std::vector<v1::JournalRecord> headless = Job();
  headless.erase(headless.begin());
  REQUIRE(RecordLog::Create(dir + "/headless.journal", false, headless).ok());
  auto h = CompactJournal(dir + "/headless.journal", dir + "/out.journal", o);
  CHECK(absl::IsFailedPrecondition(h.status()));
  CHECK_THAT(std::string(h.status().message()), Catch::Contains("declaration"));

  struct stat st;
  CHECK(stat((dir + "/out.journal").c_str(), &st) != 0);

  REQUIRE(CompactJournal(dir + "/job1.journal", dir + "/out.journal", o).ok());
  const std::string first = ReadAll(dir + "/out.journal");
  CHECK(absl::IsAlreadyExists(
      CompactJournal(dir + "/job1.journal", dir + "/out.journal", o).status()));
  CHECK(ReadAll(dir + "/out.journal") == first);
}

}  // namespace
}  // namespace stagefrontier
