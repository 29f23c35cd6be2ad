// The record log's file I/O: hidden files written whole or not at all, names for files kept
// aside that never collide, whole reads and writes.
#include "daemon/journal/journal_file_io.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/test_files.h"

namespace stagefrontier {
namespace {

using testing::ReadAll;
using testing::TempDir;

TEST_CASE("a hidden file beside the log holds the bytes; its name says whose it is") {
  const std::string dir = TempDir("sf_journal_io");
  absl::StatusOr<std::string> tmp = WriteHiddenFile(dir + "/job.journal", ".tail", "abc", true);
  REQUIRE(tmp.ok());
  CHECK(tmp->rfind(dir + "/.job.journal.tail-", 0) == 0);
  CHECK(ReadAll(*tmp) == "abc");
  CHECK(HiddenSiblingPath(dir + "/job.journal", ".x") !=
        HiddenSiblingPath(dir + "/job.journal", ".x"));
}

TEST_CASE("a hidden file that cannot be written fails naming it") {
  absl::StatusOr<std::string> tmp =
      WriteHiddenFile("/nonexistent-dir/job.journal", ".tail", "abc", false);
  CHECK(absl::IsNotFound(tmp.status()));
  CHECK_THAT(std::string(tmp.status().message()), Catch::Contains("/nonexistent-dir/.job.journal"));
}

TEST_CASE("aside names never name an existing file") {
  const std::string dir = TempDir("sf_journal_io");
  const std::string path = dir + "/job.journal";
  const std::string first = AsideName(path, ".damaged");
  CHECK(first.rfind(path + ".damaged-", 0) == 0);
  std::ofstream(first) << "x";
  const std::string second = AsideName(path, ".damaged");
  CHECK(second != first);
  CHECK(second.rfind(first + "-", 0) == 0);
  SyncDir(dir);  // best effort; never fails loudly
  SyncDir(dir + "/missing");
}

TEST_CASE("whole reads and writes at an offset; a short file is an error") {
  const std::string path = TempDir("sf_journal_io") + "/f";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(PwriteAll(fd, "hello", 3, "cannot write", path).ok());
  std::string got;
  REQUIRE(PreadExactly(fd, 3, 5, "cannot read", path, &got).ok());
  CHECK(got == "hello");
  const absl::Status s = PreadExactly(fd, 3, 6, "cannot read", path, &got);
  CHECK(absl::IsUnavailable(s));  // EIO
  CHECK_THAT(std::string(s.message()), Catch::Contains("cannot read " + path));
  ::close(fd);
  CHECK(DirOf("a/b/c") == "a/b");
  CHECK(DirOf("c") == ".");
  CHECK(DirOf("/c") == "/");
}

// Live compaction copies the compacted prefix, and the swap the newest records, in the kernel.
TEST_CASE("a range copied between files at offsets; a source that ends first is an error") {
  const std::string dir = TempDir("sf_journal_io");
  const int in = ::open((dir + "/in").c_str(), O_RDWR | O_CREAT, 0600);
  const int out = ::open((dir + "/out").c_str(), O_RDWR | O_CREAT, 0600);
  REQUIRE(in >= 0);
  REQUIRE(out >= 0);
  std::string big(3 << 20, '\0');  // more than one call may move
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  REQUIRE(PwriteAll(in, big, 0, "cannot write", dir).ok());
  REQUIRE(PwriteAll(out, "head:", 0, "cannot write", dir).ok());
  REQUIRE(CopyRange(in, 7, out, 5, big.size() - 7, "cannot copy", dir + "/in").ok());
  CHECK(ReadAll(dir + "/out") == "head:" + big.substr(7));
  const absl::Status s = CopyRange(in, big.size() - 2, out, 0, 3, "cannot copy", dir + "/in");
  CHECK(absl::IsUnavailable(s));  // EIO
  CHECK_THAT(std::string(s.message()), Catch::Contains("cannot copy " + dir + "/in"));
  ::close(in);
  ::close(out);
}

}  // namespace
}  // namespace stagefrontier
