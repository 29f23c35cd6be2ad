// The record log: records come back in order; damage anywhere costs only the damaged bytes,
// which are kept on disk; files that are not journals (or of a newer format) are left
// untouched; creation is atomic; salvage keeps what the caller keeps.
#include "daemon/journal/record_log.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "daemon/archive/record_block.h"
#include "daemon/journal/crc32c.h"
#include "tests/test_files.h"

namespace stagefrontier {
namespace {

using testing::ReadAll;
using testing::TempDir;

v1::JournalRecord Closed(int64_t step) {
  v1::JournalRecord r;
  r.mutable_closed()->set_step(step);
  return r;
}

std::vector<int64_t> Reopen(const std::string& path, JournalOpenInfo* info) {
  std::vector<int64_t> steps;
  auto j = RecordLog::Open(
      path, false,
      [&](const v1::JournalRecord& r) {
        steps.push_back(r.closed().step());
        return absl::OkStatus();
      },
      info);
  REQUIRE(j.ok());
  return steps;
}

void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.' || (std::string(e->d_name) != "." && std::string(e->d_name) != "..")) {
      out.push_back(e->d_name);
    }
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// A journal of steps 0..4, and where each record starts.
std::string MakeFive(const std::string& path, std::vector<size_t>* starts) {
  std::vector<v1::JournalRecord> recs;
  for (int s = 0; s < 5; ++s) recs.push_back(Closed(s));
  auto j = RecordLog::Create(path, true, recs);
  REQUIRE(j.ok());
  const std::string whole = ReadAll(path);
  size_t off = kJournalHeaderBytes;
  while (off < whole.size()) {
    starts->push_back(off);
    uint32_t len;
    std::memcpy(&len, whole.data() + off + 8, 4);
    off += kJournalRecordHeaderBytes + len;
  }
  REQUIRE(starts->size() == 5);
  return whole;
}

TEST_CASE("journal records replay in order, and appending goes on") {
  const std::string path = TempDir("sf_record_log") + "/job.journal";
  std::vector<size_t> starts;
  const std::string whole = MakeFive(path, &starts);
  CHECK(whole.substr(0, 8) == "SFJOURNL");
  JournalOpenInfo info;
  CHECK(Reopen(path, &info) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(info.format == 2);
  CHECK(info.skipped.empty());
  {
    auto j = RecordLog::Open(
        path, false, [](const v1::JournalRecord&) { return absl::OkStatus(); }, nullptr);
    REQUIRE(j.ok());
    (*j)->Append(Closed(99));
    REQUIRE((*j)->Flush().ok());
  }
  CHECK(Reopen(path, &info).back() == 99);
}

TEST_CASE("a RankSteps appended without its record replays as that record, in order") {
  const std::string path = TempDir("sf_record_log") + "/job.journal";
  std::vector<size_t> starts;
  MakeFive(path, &starts);
  v1::RankSteps rs;
  rs.set_job("j");
  rs.set_rank(3);
  rs.set_base_step(5);
  rs.set_count(1);
  rs.set_packed("packed");
  {
    auto j = RecordLog::Open(
        path, false, [](const v1::JournalRecord&) { return absl::OkStatus(); }, nullptr);
    REQUIRE(j.ok());
    const uint64_t before = (*j)->appended_bytes();
    (*j)->AppendRankSteps(rs);
    CHECK((*j)->appended_bytes() > before);
    (*j)->Append(Closed(5));
    REQUIRE((*j)->Flush().ok());
  }
  std::vector<v1::JournalRecord> back;
  auto j = RecordLog::Open(
      path, false,
      [&](const v1::JournalRecord& r) {
        back.push_back(r);
        return absl::OkStatus();
      },
      nullptr);
  REQUIRE(j.ok());
  REQUIRE(back.size() == 7);
  REQUIRE(back[5].has_ranks());
  REQUIRE(back[5].ranks().steps_size() == 1);
  CHECK(back[5].ranks().steps(0).SerializeAsString() == rs.SerializeAsString());
  CHECK(back[6].closed().step() == 5);
}

TEST_CASE("a torn tail is saved beside the journal before it is cut off") {
  const std::string dir = TempDir("sf_record_log");
  const std::string path = dir + "/job.journal";
  std::vector<size_t> starts;
  const std::string whole = MakeFive(path, &starts);
  WriteAll(path, whole.substr(0, whole.size() - 3));
  JournalOpenInfo info;
  CHECK(Reopen(path, &info) == std::vector<int64_t>{0, 1, 2, 3});
  REQUIRE(info.skipped.size() == 1);
  CHECK(info.skipped[0].offset == starts[4]);
  CHECK_THAT(info.skipped[0].reason, Catch::Contains("cut short"));
  REQUIRE(!info.saved_tail.empty());
  CHECK(ReadAll(info.saved_tail) == whole.substr(starts[4], whole.size() - 3 - starts[4]));
  CHECK(ReadAll(path) == whole.substr(0, starts[4]));
  CHECK_THAT(info.Describe(), Catch::Contains("saved to"));
}

// Regression (hostile input): recovery truncated the file at the first bad record, so intact
// records after a damaged one were lost on disk.
TEST_CASE("damage in the middle skips only the damaged record and keeps the original") {
  const std::string dir = TempDir("sf_record_log");
  const std::string path = dir + "/job.journal";
  std::vector<size_t> starts;
  const std::string whole = MakeFive(path, &starts);
  std::string bad = whole;
  SECTION("a flipped byte in the payload") {
    bad[starts[2] + kJournalRecordHeaderBytes + 1] ^= 0x40;
  }
  SECTION("a bogus length") { bad[starts[2] + 10] = '\x7f'; }
  SECTION("garbage over the sync word and beyond") {
    for (size_t i = starts[2]; i < starts[2] + 6; ++i) bad[i] = '\xAA';
  }
  WriteAll(path, bad);
  JournalOpenInfo info;
  CHECK(Reopen(path, &info) == std::vector<int64_t>{0, 1, 3, 4});
  REQUIRE(info.skipped.size() == 1);
  CHECK(info.skipped[0].offset == starts[2]);
  CHECK(info.skipped[0].bytes == starts[3] - starts[2]);
  REQUIRE(!info.kept_original.empty());
  CHECK(ReadAll(info.kept_original) == bad);  // kept byte for byte
  // The journal itself now holds the four intact records and nothing damaged.
  JournalOpenInfo again;
  CHECK(Reopen(path, &again) == std::vector<int64_t>{0, 1, 3, 4});
  CHECK(again.skipped.empty());
  CHECK(again.kept_original.empty());
  CHECK_THAT(info.Describe(), Catch::Contains("bytes at offset " + std::to_string(starts[2])));
}

TEST_CASE("format 1 journals are still read, and rewritten as format 2") {
  const std::string path = TempDir("sf_record_log") + "/job.journal";
  std::string v1_bytes;
  for (int s = 0; s < 3; ++s) {
    std::string payload;
    Closed(s).SerializeToString(&payload);
    const uint32_t len = static_cast<uint32_t>(payload.size());
    const uint32_t crc = Crc32c(payload.data(), payload.size());
    v1_bytes.append(reinterpret_cast<const char*>(&len), 4);
    v1_bytes.append(reinterpret_cast<const char*>(&crc), 4);
    v1_bytes += payload;
  }
  std::string damaged = v1_bytes;
  damaged[10 + 8 + 1] ^= 0x01;  // second record's payload (the first is 8 + 2 bytes)
  SECTION("intact") {
    WriteAll(path, v1_bytes);
    JournalOpenInfo info;
    CHECK(Reopen(path, &info) == std::vector<int64_t>{0, 1, 2});
    CHECK(info.format == 1);
    CHECK(ReadAll(path).substr(0, 8) == "SFJOURNL");
  }
  SECTION("damaged: format 1 resynchronizes too") {
    WriteAll(path, damaged);
    JournalOpenInfo info;
    CHECK(Reopen(path, &info) == std::vector<int64_t>{0, 2});
    CHECK(ReadAll(info.kept_original) == damaged);
  }
  JournalOpenInfo info;
  Reopen(path, &info);
  CHECK(info.format == 2);
}

TEST_CASE("what is not a journal, or of a newer format, is left untouched") {
  const std::string path = TempDir("sf_record_log") + "/job.journal";
  const auto open = [&] {
    return RecordLog::Open(
               path, false, [](const v1::JournalRecord&) { return absl::OkStatus(); }, nullptr)
        .status();
  };
  WriteAll(path, "hello, this is somebody's notes file, not a journal\n");
  absl::Status s = open();
  CHECK(absl::IsFailedPrecondition(s));
  CHECK_THAT(std::string(s.message()), Catch::Contains("not a StageFrontier journal"));
  CHECK(ReadAll(path) == "hello, this is somebody's notes file, not a journal\n");
  std::string newer = std::string("SFJOURNL\x03\0\0\0\0\0\0\0", 16) + "whatever";
  WriteAll(path, newer);
  s = open();
  CHECK(absl::IsFailedPrecondition(s));
  CHECK_THAT(std::string(s.message()), Catch::Contains("format 3 is newer"));
  CHECK(ReadAll(path) == newer);
}

TEST_CASE("a record block's records replay in its place; a newer block version is refused") {
  const std::string path = TempDir("sf_record_log") + "/job.journal";
  std::vector<v1::JournalRecord> inner = {Closed(1), Closed(2), Closed(3)};
  auto block = EncodeRecordBlock(inner, {.stage_count = 2});
  REQUIRE(block.ok());
  std::vector<v1::JournalRecord> records(3);
  records[0] = Closed(0);
  records[1].set_block(*block);
  records[2] = Closed(4);
  REQUIRE(RecordLog::Create(path, false, records).ok());
  JournalOpenInfo info;
  CHECK(Reopen(path, &info) == std::vector<int64_t>{0, 1, 2, 3, 4});
  std::vector<int64_t> scanned;
  const JournalScan scan = ScanJournal(ReadAll(path), [&](const v1::JournalRecord& r) {
    scanned.push_back(r.closed().step());
    return absl::OkStatus();
  });
  CHECK(scan.records == 3);  // frames
  CHECK(scanned == std::vector<int64_t>{0, 1, 2, 3, 4});

  const std::string newer_path = TempDir("sf_record_log") + "/job.journal";
  std::string newer = *block;
  newer[0] = 9;
  records[1].set_block(newer);
  REQUIRE(RecordLog::Create(newer_path, false, records).ok());
  const std::string before = ReadAll(newer_path);
  absl::Status s =
      RecordLog::Open(
          newer_path, false, [](const v1::JournalRecord&) { return absl::OkStatus(); }, nullptr)
          .status();
  CHECK(absl::IsFailedPrecondition(s));
  CHECK_THAT(std::string(s.message()), Catch::Contains("record block version 9 is newer"));
  CHECK(ReadAll(newer_path) == before);
}

// Hostile input (issue 17): a corrupt or truncated compressed block is reported with its
// offset, and every record around it is recovered.
TEST_CASE("a corrupt or truncated record block is skipped with its offset; the rest recovers") {
  const std::string dir = TempDir("sf_record_log");
  const std::string path = dir + "/job.journal";
  auto block_of = [](int64_t first) {
    std::vector<v1::JournalRecord> inner = {Closed(first), Closed(first + 1), Closed(first + 2)};
    auto block = EncodeRecordBlock(inner, {.stage_count = 2});
    REQUIRE(block.ok());
    return *block;
  };
  std::string good_block = block_of(1);
  std::string bad_block = good_block;
  SECTION("the zstd frame cut short, behind an intact journal frame") {
    bad_block.resize(bad_block.size() - 5);
  }
  SECTION("a flipped byte in the compressed columns, behind an intact journal frame") {
    bad_block[bad_block.size() - 6] ^= 0x10;
  }
  std::vector<v1::JournalRecord> records(4);
  records[0] = Closed(0);
  records[1].set_block(bad_block);
  records[2].set_block(block_of(4));
  records[3] = Closed(7);
  REQUIRE(RecordLog::Create(path, false, records).ok());
  const std::string whole = ReadAll(path);
  // Where the bad block's frame starts and ends.
  uint32_t first_len = 0;
  std::memcpy(&first_len, whole.data() + kJournalHeaderBytes + 8, 4);
  const size_t bad_at = kJournalHeaderBytes + kJournalRecordHeaderBytes + first_len;
  uint32_t bad_len = 0;
  std::memcpy(&bad_len, whole.data() + bad_at + 8, 4);

  std::vector<int64_t> scanned;
  const JournalScan scan = ScanJournal(whole, [&](const v1::JournalRecord& r) {
    scanned.push_back(r.closed().step());
    return absl::OkStatus();
  });
  CHECK(scan.error.empty());
  CHECK(scanned == std::vector<int64_t>{0, 4, 5, 6, 7});
  REQUIRE(scan.skipped.size() == 1);
  CHECK(scan.skipped[0].offset == bad_at);
  CHECK(scan.skipped[0].bytes == kJournalRecordHeaderBytes + bad_len);
  CHECK_THAT(scan.skipped[0].reason, Catch::Contains("record block"));

  JournalOpenInfo info;
  CHECK(Reopen(path, &info) == std::vector<int64_t>{0, 4, 5, 6, 7});
  REQUIRE(info.skipped.size() == 1);
  CHECK(info.skipped[0].offset == bad_at);
  CHECK_THAT(info.Describe(), Catch::Contains("bytes at offset " + std::to_string(bad_at)));
  REQUIRE(!info.kept_original.empty());
  CHECK(ReadAll(info.kept_original) == whole);
  JournalOpenInfo again;
  CHECK(Reopen(path, &again) == std::vector<int64_t>{0, 4, 5, 6, 7});
  CHECK(again.skipped.empty());
}

TEST_CASE("a record block torn by a crash mid-append is the saved tail; the rest recovers") {
  const std::string dir = TempDir("sf_record_log");
  const std::string path = dir + "/job.journal";
  std::vector<v1::JournalRecord> inner = {Closed(1), Closed(2), Closed(3)};
  auto block = EncodeRecordBlock(inner, {.stage_count = 2});
  REQUIRE(block.ok());
  std::vector<v1::JournalRecord> records(2);
  records[0] = Closed(0);
  records[1].set_block(*block);
  REQUIRE(RecordLog::Create(path, false, records).ok());
  const std::string whole = ReadAll(path);
  WriteAll(path, whole.substr(0, whole.size() - 4));
  JournalOpenInfo info;
  CHECK(Reopen(path, &info) == std::vector<int64_t>{0});
  REQUIRE(info.skipped.size() == 1);
  CHECK_THAT(info.skipped[0].reason, Catch::Contains("cut short"));
  CHECK(!info.saved_tail.empty());
}

// Regression (hostile input): a full disk when a job first appeared left an empty journal
// behind, and the job was refused for good.
TEST_CASE("creation is atomic: a full disk leaves nothing behind, and a retry succeeds") {
  const std::string dir = TempDir("sf_record_log");
  const std::string path = dir + "/job.journal";
  signal(SIGXFSZ, SIG_IGN);  // writes past the limit fail with EFBIG instead of killing us
  rlimit old{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  rlimit tiny = old;
  tiny.rlim_cur = 10;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &tiny) == 0);
  std::vector<v1::JournalRecord> recs = {Closed(1)};
  auto j = RecordLog::Create(path, true, recs);
  REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
  REQUIRE(!j.ok());
  CHECK(absl::IsUnavailable(j.status()));
  CHECK(Files(dir).empty());
  j = RecordLog::Create(path, true, recs);
  REQUIRE(j.ok());
  CHECK(absl::IsAlreadyExists(RecordLog::Create(path, true, recs).status()));
  JournalOpenInfo info;
  CHECK(Reopen(path, &info) == std::vector<int64_t>{1});
}

TEST_CASE("a replay error stops the open, names the record and changes nothing") {
  const std::string path = TempDir("sf_record_log") + "/job.journal";
  std::vector<v1::JournalRecord> recs = {Closed(1)};
  REQUIRE(RecordLog::Create(path, false, recs).ok());
  const std::string before = ReadAll(path);
  auto j = RecordLog::Open(
      path, false, [](const v1::JournalRecord&) { return absl::DataLossError("nope"); }, nullptr);
  REQUIRE(!j.ok());
  CHECK(j.status().message() == "nope");
  CHECK(ReadAll(path) == before);
}

TEST_CASE("salvage writes the new first record, then the intact records it keeps") {
  const std::string path = TempDir("sf_record_log") + "/job.journal";
  std::vector<size_t> starts;
  std::string bad = MakeFive(path, &starts);
  bad[starts[0] + kJournalRecordHeaderBytes + 1] ^= 0x40;  // the first record is lost
  WriteAll(path, bad);
  JournalOpenInfo info;
  REQUIRE(RecordLog::Salvage(
              path, false, Closed(100),
              [](const v1::JournalRecord& r) { return r.closed().step() != 3; }, &info)
              .ok());
  CHECK(info.records == 4);  // the new first record and steps 1, 2, 4
  REQUIRE(info.skipped.size() == 1);
  CHECK(info.skipped[0].offset == starts[0]);
  REQUIRE(!info.kept_original.empty());
  CHECK(ReadAll(info.kept_original) == bad);
  JournalOpenInfo again;
  CHECK(Reopen(path, &again) == std::vector<int64_t>{100, 1, 2, 4});
  CHECK(again.skipped.empty());
}

TEST_CASE("salvage leaves what is not a journal untouched") {
  const std::string path = TempDir("sf_record_log") + "/job.journal";
  WriteAll(path, "notes, not a journal\n");
  const absl::Status s = RecordLog::Salvage(
      path, false, Closed(1), [](const v1::JournalRecord&) { return true; }, nullptr);
  CHECK(absl::IsFailedPrecondition(s));
  CHECK_THAT(std::string(s.message()), Catch::Contains("left untouched"));
  CHECK(ReadAll(path) == "notes, not a journal\n");
}

TEST_CASE("open-or-create starts an empty log, then opens it with what was appended") {
  const std::string path = TempDir("sf_record_log") + "/ledger";
  {
    auto log = RecordLog::OpenOrCreate(
        path, false, [](const v1::JournalRecord&) { return absl::OkStatus(); }, nullptr);
    REQUIRE(log.ok());
    CHECK(ReadAll(path) == JournalFileHeader());
    (*log)->Append(Closed(7));
    REQUIRE((*log)->Flush().ok());
    CHECK((*log)->durable_bytes() == (*log)->appended_bytes());
  }
  std::vector<int64_t> steps;
  auto log = RecordLog::OpenOrCreate(
      path, false,
      [&](const v1::JournalRecord& r) {
        steps.push_back(r.closed().step());
        return absl::OkStatus();
      },
      nullptr);
  REQUIRE(log.ok());
  CHECK(steps == std::vector<int64_t>{7});
}

}  // namespace
}  // namespace stagefrontier
