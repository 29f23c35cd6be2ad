#include "daemon/common/untrusted_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "tests/shm/test_support.h"

namespace stagefrontier {
namespace {

using testing::MakeTempDir;
using testing::ReadFile;

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

TEST_CASE("untrusted dir: CreateExclusive never writes through a link, never truncates") {
  const std::string dir = MakeTempDir();
  const std::string elsewhere = MakeTempDir();
  absl::StatusOr<UniqueFd> fd = OpenDirectoryNoFollow(dir);
  REQUIRE(fd.ok());
  // A dangling link: open(O_CREAT) without O_EXCL would create its target.
  REQUIRE(::symlink((elsewhere + "/new").c_str(), (dir + "/a").c_str()) == 0);
  CHECK(absl::IsAlreadyExists(CreateExclusive(fd->get(), "a", "x")));
  CHECK_FALSE(Exists(elsewhere + "/new"));
  // A link to an existing file: a truncating open would empty it.
  std::ofstream(elsewhere + "/old") << "keep me";
  REQUIRE(::symlink((elsewhere + "/old").c_str(), (dir + "/b").c_str()) == 0);
  CHECK(absl::IsAlreadyExists(CreateExclusive(fd->get(), "b", "x")));
  CHECK(ReadFile(elsewhere + "/old") == "keep me");
  // A file already there stays as it is.
  REQUIRE(CreateExclusive(fd->get(), "c", "first").ok());
  CHECK(absl::IsAlreadyExists(CreateExclusive(fd->get(), "c", "second")));
  CHECK(ReadFile(dir + "/c") == "first");
  CHECK(absl::IsInvalidArgument(CreateExclusive(fd->get(), "../c", "x")));
  CHECK(absl::IsInvalidArgument(CreateExclusive(fd->get(), "..", "x")));
}

TEST_CASE("untrusted dir: links are refused at every level, files and directories") {
  const std::string dir = MakeTempDir();
  const std::string elsewhere = MakeTempDir();
  REQUIRE(::mkdir((dir + "/sub").c_str(), 0700) == 0);
  std::ofstream(elsewhere + "/secret") << "secret";
  REQUIRE(::symlink(elsewhere.c_str(), (dir + "/linkdir").c_str()) == 0);
  REQUIRE(::symlink((elsewhere + "/secret").c_str(), (dir + "/sub/linkfile").c_str()) == 0);
  CHECK(OpenDirectoryNoFollow(dir + "/sub").ok());
  CHECK(OpenDirectoryNoFollow(dir + "/sub/").ok());
  const absl::StatusOr<UniqueFd> via_link = OpenDirectoryNoFollow(dir + "/linkdir");
  CHECK(absl::IsFailedPrecondition(via_link.status()));
  CHECK(absl::IsNotFound(OpenDirectoryNoFollow(dir + "/missing").status()));
  absl::StatusOr<UniqueFd> root = OpenDirectoryNoFollow(dir);
  REQUIRE(root.ok());
  CHECK(absl::IsFailedPrecondition(OpenSubdirectoryNoFollow(root->get(), "linkdir").status()));
  absl::StatusOr<UniqueFd> sub = OpenSubdirectoryNoFollow(root->get(), "sub");
  REQUIRE(sub.ok());
  const absl::StatusOr<UniqueFd> file = OpenFileNoFollow(sub->get(), "linkfile");
  CHECK(absl::IsFailedPrecondition(file.status()));
  CHECK_THAT(std::string(file.status().message()), Catch::Contains("symbolic link"));
  CHECK(ListDirectory(root->get()) == std::vector<std::string>{"linkdir", "sub"});
  CHECK(ListDirectory(root->get()) == std::vector<std::string>{"linkdir", "sub"});  // again
  CHECK(EntryExists(sub->get(), "linkfile"));
  CHECK_FALSE(EntryExists(sub->get(), "nothing"));
  // A FIFO opens without blocking (the caller then refuses its type).
  REQUIRE(::mkfifo((dir + "/sub/fifo").c_str(), 0600) == 0);
  absl::StatusOr<UniqueFd> fifo = OpenFileNoFollow(sub->get(), "fifo");
  REQUIRE(fifo.ok());
  struct stat st {};
  REQUIRE(::fstat(fifo->get(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
}

}  // namespace
}  // namespace stagefrontier
