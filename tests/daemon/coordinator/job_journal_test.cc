// The journal: records come back in order; a torn tail, a flipped byte and a bogus length are
// detected, cut off at open, and appending goes on after the last whole record.
#include "daemon/coordinator/job_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "daemon/coordinator/crc32c.h"

namespace stagefrontier {
namespace {

std::string TempPath() {
  char dir[] = "/tmp/sf_journal_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  return std::string(dir) + "/job.journal";
}

v1::JournalRecord Closed(int64_t step) {
  v1::JournalRecord r;
  r.mutable_closed()->set_step(step);
  return r;
}

std::vector<int64_t> Reopen(const std::string& path, JournalOpenInfo* info) {
  std::vector<int64_t> steps;
  auto j = JobJournal::Open(
      path, false,
      [&](const v1::JournalRecord& r) {
        steps.push_back(r.closed().step());
        return absl::OkStatus();
      },
      info);
  REQUIRE(j.ok());
  return steps;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

TEST_CASE("CRC-32C known answer") { CHECK(Crc32c("123456789", 9) == 0xE3069283U); }

TEST_CASE("journal records replay in order; damage is cut off and appending resumes") {
  const std::string path = TempPath();
  {
    auto j = JobJournal::Open(
        path, true, [](const v1::JournalRecord&) { return absl::OkStatus(); }, nullptr);
    REQUIRE(j.ok());
    for (int s = 0; s < 5; ++s) (*j)->Append(Closed(s));
    REQUIRE((*j)->Flush().ok());
  }
  JournalOpenInfo info;
  CHECK(Reopen(path, &info) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(info.truncated_bytes == 0);
  const std::string whole = ReadAll(path);

  SECTION("a torn tail") {
    WriteAll(path, whole.substr(0, whole.size() - 3));
    CHECK(Reopen(path, &info) == std::vector<int64_t>{0, 1, 2, 3});
    CHECK(info.truncated_bytes > 0);
    CHECK_THAT(info.truncation_reason, Catch::Contains("cut short"));
  }
  SECTION("a flipped byte in the third record") {
    std::string bad = whole;
    const size_t rec = whole.size() / 5;
    bad[2 * rec + 9] ^= 0x40;
    WriteAll(path, bad);
    CHECK(Reopen(path, &info) == std::vector<int64_t>{0, 1});
    CHECK_THAT(info.truncation_reason, Catch::Contains("checksum"));
  }
  SECTION("a bogus length") {
    std::string bad = whole + std::string("\xff\xff\xff\x7f\0\0\0\0", 8);
    WriteAll(path, bad);
    CHECK(Reopen(path, &info).size() == 5);
    CHECK_THAT(info.truncation_reason, Catch::Contains("claims"));
  }
  // After the cut, appending continues from the last whole record.
  {
    auto j = JobJournal::Open(
        path, false, [](const v1::JournalRecord&) { return absl::OkStatus(); }, nullptr);
    REQUIRE(j.ok());
    (*j)->Append(Closed(99));
    REQUIRE((*j)->Flush().ok());
  }
  std::vector<int64_t> after = Reopen(path, &info);
  CHECK(info.truncated_bytes == 0);
  CHECK(after.back() == 99);
}

TEST_CASE("a replay error stops the open and names the record") {
  const std::string path = TempPath();
  {
    auto j = JobJournal::Open(
        path, false, [](const v1::JournalRecord&) { return absl::OkStatus(); }, nullptr);
    REQUIRE(j.ok());
    (*j)->Append(Closed(1));
  }
  auto j = JobJournal::Open(
      path, false, [](const v1::JournalRecord&) { return absl::DataLossError("nope"); }, nullptr);
  REQUIRE(!j.ok());
  CHECK(j.status().message() == "nope");
}

}  // namespace
}  // namespace stagefrontier
