#include "daemon/coordinator/journal_compactor.h"

#include <dirent.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "tests/daemon/archive/step_records.h"

namespace stagefrontier {
namespace {

constexpr uint32_t kStages = 3;

std::string TempDir() {
  char dir[] = "/tmp/sf_compactor_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  return dir;
}

v1::JournalRecord Declared() {
  v1::JournalRecord r;
  r.mutable_declared()->set_job("job");
  r.mutable_declared()->set_world_size(4);
  for (uint32_t k = 0; k < kStages; ++k) r.mutable_declared()->add_stages()->set_name("s");
  return r;
}

// Step `step` of ranks 0..3 as one node's batch, then its close.
std::vector<v1::JournalRecord> Step(int64_t step, std::mt19937_64& rng) {
  return NodeStepRecords(step, kStages, 4, rng);
}

// Every record the journal at `path` replays, serialized.
std::vector<std::string> Replayed(const std::string& path, RecordLog::Layout* layout = nullptr) {
  std::vector<std::string> out;
  auto j = JobJournal::Open(
      path, false,
      [&](const v1::JournalRecord& r) {
        out.push_back(r.SerializeAsString());
        return absl::OkStatus();
      },
      nullptr);
  REQUIRE(j.ok());
  if (layout != nullptr) *layout = (*j)->log().CurrentLayout();
  return out;
}

uint64_t FileSize(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return static_cast<uint64_t>(st.st_size);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int FilesIn(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  while (const dirent* e = readdir(d))
    n += e->d_name[0] != '.' || std::string(e->d_name).size() > 2;
  closedir(d);
  return n;
}

// Appends steps [first, last) to `j` and their serialized records to `expected`.
void AppendSteps(JobJournal& j, int64_t first, int64_t last, std::mt19937_64& rng,
                 std::vector<std::string>* expected) {
  for (int64_t s = first; s < last; ++s) {
    for (const v1::JournalRecord& r : Step(s, rng)) {
      j.Append(r);
      expected->push_back(r.SerializeAsString());
    }
  }
}

TEST_CASE("a live journal compacts in place: the same records, fewer bytes, appends go on") {
  const std::string dir = TempDir();
  const std::string path = dir + "/job.journal";
  std::mt19937_64 rng(1);
  auto journal = JobJournal::Create(path, true, std::vector<v1::JournalRecord>{Declared()});
  REQUIRE(journal.ok());
  JobJournal& j = **journal;
  std::vector<std::string> expected = {Declared().SerializeAsString()};
  AppendSteps(j, 0, 400, rng, &expected);
  REQUIRE(j.Flush().ok());
  const uint64_t position = j.appended_bytes();
  const uint64_t before = FileSize(path);

  SECTION("not due: nothing changes") {
    auto r = CompactLiveJournal(j, kStages, {.min_plain_bytes = before});
    REQUIRE(r.ok());
    CHECK(r->records == 0);
    CHECK(FileSize(path) == before);
  }
  SECTION("due") {
    auto r = CompactLiveJournal(j, kStages, {.min_plain_bytes = 1, .block_steps = 100});
    REQUIRE(r.ok());
    CHECK(r->records == 800);
    CHECK(r->blocks == 4);
    const uint64_t after = FileSize(path);
    CHECK(after * 2 < before);
    CHECK(r->file_bytes_after == after);
    CHECK(r->file_bytes_before == before);
    CHECK_THAT(r->Describe(), Catch::Contains("800 records into 4 record blocks"));
    // Positions never go back: acks waiting for `position` are satisfied.
    CHECK(j.appended_bytes() == position);
    CHECK(j.durable_bytes() == position);
    // Appending goes on into the new file.
    for (const v1::JournalRecord& rec : Step(400, rng)) {
      j.Append(rec);
      expected.push_back(rec.SerializeAsString());
    }
    REQUIRE(j.Flush().ok());
    CHECK(j.durable_bytes() > position);
    RecordLog::Layout layout;
    CHECK(Replayed(path, &layout) == expected);
    CHECK(layout.compacted_end == j.log().CurrentLayout().compacted_end);  // found again on open
    CHECK(FilesIn(dir) == 1);                                              // no temporary left

    SECTION("a second compaction takes only the new records; the old blocks stay byte for byte") {
      const std::string prefix = ReadAll(path).substr(0, layout.compacted_end);
      AppendSteps(j, 401, 700, rng, &expected);
      REQUIRE(j.Flush().ok());
      auto again = CompactLiveJournal(j, kStages, {.min_plain_bytes = 1});
      REQUIRE(again.ok());
      CHECK(again->records == 600);
      CHECK(ReadAll(path).substr(0, layout.compacted_end) == prefix);
      CHECK(Replayed(path) == expected);
    }
    SECTION("a bounded region compacts part; the rest stays plain and replays in place") {
      AppendSteps(j, 401, 700, rng, &expected);
      REQUIRE(j.Flush().ok());
      auto part =
          CompactLiveJournal(j, kStages, {.min_plain_bytes = 1, .max_region_bytes = 20'000});
      REQUIRE(part.ok());
      CHECK(part->records > 0);
      CHECK(part->records < 600);
      CHECK(Replayed(path) == expected);
    }
  }
}

// Each compaction copies the compacted prefix, so a long job's compactions must grow apart
// as it grows: due only once the plain records reach prefix_fraction of the prefix (the
// copying stays in proportion to what is compacted), and then up to twice what was due is
// taken, whatever max_region_bytes says.
TEST_CASE("a compaction waits for plain records in proportion to the compacted prefix") {
  const std::string dir = TempDir();
  const std::string path = dir + "/job.journal";
  std::mt19937_64 rng(3);
  auto journal = JobJournal::Create(path, false, std::vector<v1::JournalRecord>{Declared()});
  REQUIRE(journal.ok());
  JobJournal& j = **journal;
  std::vector<std::string> expected = {Declared().SerializeAsString()};
  AppendSteps(j, 0, 400, rng, &expected);
  REQUIRE(j.Flush().ok());
  REQUIRE(CompactLiveJournal(j, kStages, {.min_plain_bytes = 1})->records == 800);
  const uint64_t prefix = j.log().CurrentLayout().compacted_end;
  const auto plain = [&] {
    const RecordLog::Layout l = j.log().CurrentLayout();
    return l.written_end - l.compacted_end;
  };
  int64_t step = 400;
  AppendSteps(j, step, step + 1, rng, &expected);
  ++step;
  REQUIRE(j.Flush().ok());
  REQUIRE(plain() * 4 < prefix);
  CHECK(CompactLiveJournal(j, kStages, {.min_plain_bytes = 1})->records == 0);
  // Without the fraction, the same journal is due at once.
  SECTION("prefix_fraction 0: min_plain_bytes alone") {
    CHECK(CompactLiveJournal(j, kStages, {.min_plain_bytes = 1, .prefix_fraction = 0})->records ==
          2);
  }
  SECTION("due at a quarter of the prefix, and taken whole past max_region_bytes") {
    while (plain() * 4 < prefix) {
      AppendSteps(j, step, step + 1, rng, &expected);
      ++step;
      REQUIRE(j.Flush().ok());
    }
    auto r = CompactLiveJournal(j, kStages, {.min_plain_bytes = 1, .max_region_bytes = 1});
    REQUIRE(r.ok());
    CHECK(r->records == static_cast<uint64_t>(2 * (step - 400)));
    CHECK(plain() == 0);
    CHECK(Replayed(path) == expected);
  }
}

// The region is read, and the blocks written, a chunk at a time: frames that straddle chunks,
// and frames longer than a chunk, come out the same as with the whole region at once.
TEST_CASE("the chunk size of compaction's reads and writes changes no byte of the result") {
  auto compacted = [](size_t chunk, std::vector<std::string>* expected) {
    const std::string dir = TempDir();
    const std::string path = dir + "/job.journal";
    std::mt19937_64 rng(4);
    auto journal = JobJournal::Create(path, true, std::vector<v1::JournalRecord>{Declared()});
    REQUIRE(journal.ok());
    JobJournal& j = **journal;
    expected->assign(1, Declared().SerializeAsString());
    AppendSteps(j, 0, 300, rng, expected);
    REQUIRE(j.Flush().ok());
    auto r = CompactLiveJournal(j, kStages,
                                {.min_plain_bytes = 1, .block_steps = 40, .io_chunk_bytes = chunk});
    REQUIRE(r.ok());
    CHECK(r->records == 600);
    CHECK(r->blocks == 8);
    CHECK(Replayed(path) == *expected);
    CHECK(FilesIn(dir) == 1);
    return ReadAll(path);
  };
  std::vector<std::string> expected;
  const std::string whole = compacted(64 << 20, &expected);
  for (size_t chunk : {size_t{1}, size_t{13}, size_t{100}, size_t{4096}}) {
    INFO("chunk " << chunk);
    std::vector<std::string> again;
    CHECK(compacted(chunk, &again) == whole);
    CHECK(again == expected);
  }
}

TEST_CASE("compaction while another thread appends and flushes loses and repeats nothing") {
  const std::string dir = TempDir();
  const std::string path = dir + "/job.journal";
  auto journal = JobJournal::Create(path, false, std::vector<v1::JournalRecord>{Declared()});
  REQUIRE(journal.ok());
  JobJournal& j = **journal;
  std::vector<std::string> expected = {Declared().SerializeAsString()};
  std::atomic<bool> done{false};
  std::atomic<int> writer_errors{0};  // Catch's macros are not for other threads
  std::thread writer([&] {
    std::mt19937_64 rng(2);
    for (int64_t s = 0; s < 1500; ++s) {
      for (const v1::JournalRecord& r : Step(s, rng)) {
        j.Append(r);
        expected.push_back(r.SerializeAsString());
      }
      if (s % 7 == 0 && !j.Flush().ok()) ++writer_errors;
      const uint64_t p = j.appended_bytes();
      if (s % 50 == 0 && (!j.Flush().ok() || j.durable_bytes() < p)) ++writer_errors;
    }
    if (!j.Flush().ok()) ++writer_errors;
    done = true;
  });
  int compactions = 0;
  while (!done) {
    auto r = CompactLiveJournal(j, kStages, {.min_plain_bytes = 4'000, .block_steps = 50});
    REQUIRE(r.ok());
    compactions += r->records > 0;
  }
  writer.join();
  CHECK(writer_errors == 0);
  CHECK(compactions > 0);
  CHECK(j.durable_bytes() == j.appended_bytes());
  CHECK(Replayed(path) == expected);
}

TEST_CASE("a region that is not intact frames is refused and the journal is left as it was") {
  const std::string dir = TempDir();
  const std::string path = dir + "/job.journal";
  std::mt19937_64 rng(3);
  auto journal = JobJournal::Create(path, false, std::vector<v1::JournalRecord>{Declared()});
  REQUIRE(journal.ok());
  for (int64_t s = 0; s < 50; ++s) {
    for (const v1::JournalRecord& r : Step(s, rng)) (*journal)->Append(r);
  }
  REQUIRE((*journal)->Flush().ok());
  // Damage under the live journal (a disk error, a hand edit): the first plain record's sync
  // word, or its length (past the largest record), read whole or a few bytes at a time.
  const uint64_t at = (*journal)->log().CurrentLayout().compacted_end;
  const uint64_t damaged_byte = GENERATE(uint64_t{0}, uint64_t{11});
  const size_t chunk = GENERATE(size_t{8} << 20, size_t{1}, size_t{5});
  INFO("byte " << damaged_byte << " of the frame, chunks of " << chunk);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(at + damaged_byte));
    f.put('\xff');
  }
  const std::string damaged = ReadAll(path);
  auto r = CompactLiveJournal(**journal, kStages, {.min_plain_bytes = 1, .io_chunk_bytes = chunk});
  CHECK(absl::IsDataLoss(r.status()));
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("offset " + std::to_string(at)));
  CHECK(ReadAll(path) == damaged);
  CHECK(FilesIn(dir) == 1);
}

}  // namespace
}  // namespace stagefrontier
