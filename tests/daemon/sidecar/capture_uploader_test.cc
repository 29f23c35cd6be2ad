#include "daemon/sidecar/capture_uploader.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "daemon/captures/capture_store.h"
#include "shm/segment_file.h"

namespace stagefrontier {
namespace {

std::string TempDir() {
  char dir[] = "/tmp/sf_capture_uploader_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  return dir;
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The coordinator's store behind a fake wire that can be cut after N chunks.
class StoreSender : public CaptureSender {
 public:
  explicit StoreSender(CaptureStore* store) : store_(store) {}
  absl::StatusOr<v1::CaptureChunkAck> Send(const v1::CaptureChunk& chunk) override {
    ++calls;
    if (fail_after >= 0 && calls > fail_after) return absl::UnavailableError("connection refused");
    return store_->Accept(chunk);
  }
  int calls = 0;
  int fail_after = -1;

 private:
  CaptureStore* store_;
};

std::string Trace(size_t n) {
  std::string s = "{\"traceEvents\": [";
  for (size_t i = 0; s.size() < n; ++i)
    s += "{\"name\": \"aten::addmm\", \"ts\": " + std::to_string(i) + "},";
  return s + "{}]}";
}

TEST_CASE("capture uploader: sends each finished file once, resumes after a cut, keeps the files") {
  const std::string node_dir = TempDir();
  const std::string coordinator_dir = TempDir();
  CaptureStore store({.root = coordinator_dir});
  REQUIRE(store.Open().ok());
  StoreSender sender(&store);
  REQUIRE(::mkdir((node_dir + "/job1").c_str(), 0700) == 0);
  const std::string big = Trace(50000), small = Trace(3000);
  Write(node_dir + "/job1/trace_rank1_step20.json", big);
  Write(node_dir + "/job1/trace_rank0_step20.json", small);
  Write(node_dir + "/job1/trace_rank2_step20.json.12345.part", "half a file");  // being written
  Write(node_dir + "/job1/notes.txt", "not a capture");
  CaptureUploaderOptions options;
  options.directory = node_dir;
  options.node = "node0";
  options.chunk_bytes = 16384;
  std::vector<std::string> log;
  CaptureUploader uploader(
      options, [&](const std::string&) { return &sender; },
      [&](const std::string& line) { log.push_back(line); });

  // The wire breaks after two chunks: the first file (rank 0, small) is sent, the second is cut.
  sender.fail_after = 2;
  CHECK(uploader.UploadPass() == 1);
  CHECK(uploader.counters().send_errors == 1);
  CHECK(Exists(node_dir + "/job1/trace_rank0_step20.json.uploaded"));
  CHECK_FALSE(Exists(node_dir + "/job1/trace_rank1_step20.json.uploaded"));
  // Back: the next pass begins again at 0 and is told where the coordinator stands.
  sender.fail_after = -1;
  sender.calls = 0;
  CHECK(uploader.UploadPass() == 1);
  CHECK(sender.calls == 1 + 3);  // one chunk answered "go on from 16384", then the 3 left
  CHECK(Slurp(coordinator_dir + "/job1/trace_rank1_step20.json") == big);
  CHECK(Slurp(coordinator_dir + "/job1/trace_rank0_step20.json") == small);
  CHECK(uploader.counters().files_sent == 2);
  CHECK(uploader.counters().bytes_sent == big.size() + small.size());
  CHECK(uploader.counters().wire_bytes < (big.size() + small.size()) / 2);
  // The trainer's files stay; nothing is sent twice.
  CHECK(Exists(node_dir + "/job1/trace_rank1_step20.json"));
  sender.calls = 0;
  CHECK(uploader.UploadPass() == 0);
  CHECK(sender.calls == 0);
  CHECK(store.Files("job1").size() == 2);
}

TEST_CASE("capture uploader: a file the coordinator refuses is marked with the reason, once") {
  const std::string node_dir = TempDir();
  CaptureStore store({.root = TempDir(), .max_file_bytes = 1000});
  REQUIRE(store.Open().ok());
  StoreSender sender(&store);
  REQUIRE(::mkdir((node_dir + "/job1").c_str(), 0700) == 0);
  Write(node_dir + "/job1/trace_rank0_step5.json", Trace(5000));
  CaptureUploaderOptions options;
  options.directory = node_dir;
  CaptureUploader uploader(options, [&](const std::string&) { return &sender; });
  uploader.UploadPass();
  CHECK(uploader.counters().files_refused == 1);
  const std::string reason = Slurp(node_dir + "/job1/trace_rank0_step5.json.refused");
  CHECK(reason.find("over the coordinator's limit") != std::string::npos);
  sender.calls = 0;
  uploader.UploadPass();
  CHECK(sender.calls == 0);
}

TEST_CASE("capture uploader: a symbolic link or a non-file is refused, never followed") {
  const std::string node_dir = TempDir();
  CaptureStore store({.root = TempDir()});
  REQUIRE(store.Open().ok());
  StoreSender sender(&store);
  REQUIRE(::mkdir((node_dir + "/job1").c_str(), 0700) == 0);
  const std::string secret = node_dir + "/secret.txt";
  Write(secret, "not for the coordinator");
  REQUIRE(::symlink(secret.c_str(), (node_dir + "/job1/trace_rank0_step5.json").c_str()) == 0);
  REQUIRE(::mkfifo((node_dir + "/job1/trace_rank1_step5.json").c_str(), 0600) == 0);
  CaptureUploaderOptions options;
  options.directory = node_dir;
  CaptureUploader uploader(options, [&](const std::string&) { return &sender; });
  CHECK(uploader.UploadPass() == 2);  // both settled: refused
  CHECK(sender.calls == 0);
  CHECK(uploader.counters().files_refused == 2);
  CHECK(Slurp(node_dir + "/job1/trace_rank0_step5.json.refused").find("symbolic link") !=
        std::string::npos);
  CHECK(Slurp(node_dir + "/job1/trace_rank1_step5.json.refused").find("not a regular file") !=
        std::string::npos);
  CHECK(store.Files("").empty());
}

TEST_CASE("capture uploader: a half-written file of a dead trainer is removed once stale") {
  const std::string node_dir = TempDir();
  CaptureStore store({.root = TempDir()});
  REQUIRE(store.Open().ok());
  StoreSender sender(&store);
  REQUIRE(::mkdir((node_dir + "/job1").c_str(), 0700) == 0);
  const std::string stale = node_dir + "/job1/trace_rank0_step5.json.111.part";
  const std::string fresh = node_dir + "/job1/trace_rank1_step5.json.222.part";
  const std::string other = node_dir + "/job1/notes.333.part";
  for (const std::string& p : {stale, fresh, other}) Write(p, "{\"traceEvents\": [");
  // Written 11 minutes ago (the default age is 10).
  const struct timespec old_times[2] = {{::time(nullptr) - 660, 0}, {::time(nullptr) - 660, 0}};
  REQUIRE(::utimensat(AT_FDCWD, stale.c_str(), old_times, 0) == 0);
  REQUIRE(::utimensat(AT_FDCWD, other.c_str(), old_times, 0) == 0);
  CaptureUploaderOptions options;
  options.directory = node_dir;
  std::vector<std::string> log;
  CaptureUploader uploader(
      options, [&](const std::string&) { return &sender; },
      [&](const std::string& line) { log.push_back(line); });
  CHECK(uploader.UploadPass() == 0);  // nothing to send
  CHECK_FALSE(Exists(stale));
  CHECK(Exists(fresh));  // maybe still being written
  CHECK(Exists(other));  // not a capture's: not the sidecar's to remove
  CHECK(uploader.counters().parts_removed == 1);
  REQUIRE(log.size() == 1);
  CHECK_THAT(log[0],
             Catch::Contains("trace_rank0_step5.json.111.part: a capture left half-written"));
  CHECK(sender.calls == 0);
}

TEST_CASE("capture uploader: only the sidecar's jobs, and folders that are job ids") {
  const std::string node_dir = TempDir();
  CaptureStore store({.root = TempDir()});
  REQUIRE(store.Open().ok());
  StoreSender sender(&store);
  for (const char* job : {"mine", "other", ".hidden"}) {
    REQUIRE(::mkdir((node_dir + "/" + job).c_str(), 0700) == 0);
    Write(node_dir + "/" + job + "/trace_rank0_step5.json", Trace(100));
  }
  CaptureUploaderOptions options;
  options.directory = node_dir;
  options.only_job = "mine";
  CaptureUploader uploader(options, [&](const std::string&) { return &sender; });
  CHECK(uploader.UploadPass() == 1);
  CHECK(store.Files("mine").size() == 1);
  CHECK(store.Files("").size() == 1);
}

TEST_CASE("capture uploader: Run passes until Stop") {
  const std::string node_dir = TempDir();
  CaptureStore store({.root = TempDir()});
  REQUIRE(store.Open().ok());
  StoreSender sender(&store);
  CaptureUploaderOptions options;
  options.directory = node_dir;
  options.interval = std::chrono::milliseconds(5);
  CaptureUploader uploader(options, [&](const std::string&) { return &sender; });
  std::thread t([&] { uploader.Run(); });
  REQUIRE(::mkdir((node_dir + "/j").c_str(), 0700) == 0);
  Write(node_dir + "/j/trace_rank3_step9.json", Trace(100));
  for (int i = 0; i < 2000 && store.Files("j").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  uploader.Stop();
  t.join();
  CHECK(store.Files("j").size() == 1);
}

// Runs `plant` as an unprivileged user (nobody, 65534) in a child process, as a trainer's user
// would; false when this test does not run as root (then the attack is planted as ourselves).
bool AsNobody(const std::function<void()>& plant) {
  if (::geteuid() != 0) {
    plant();
    return false;
  }
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    plant();
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return true;
}

// A sender that runs `during` while the first chunk is in flight (the window between the
// marker check and the marker write).
class RacingSender : public StoreSender {
 public:
  using StoreSender::StoreSender;
  absl::StatusOr<v1::CaptureChunkAck> Send(const v1::CaptureChunk& chunk) override {
    if (during) std::exchange(during, nullptr)();
    return StoreSender::Send(chunk);
  }
  std::function<void()> during;
};

TEST_CASE(
    "capture uploader: planted marker links never make the sidecar create or truncate "
    "a file (issue 28, attack 1)") {
  const std::string node_dir = TempDir();
  const std::string victims = TempDir();  // root's files elsewhere on the node
  CaptureStore store({.root = TempDir()});
  REQUIRE(store.Open().ok());
  RacingSender sender(&store);
  const std::string job_dir = node_dir + "/job1";
  REQUIRE(::mkdir(job_dir.c_str(), 0755) == 0);
  REQUIRE(::chmod(node_dir.c_str(), 0755) == 0);
  if (::geteuid() == 0) REQUIRE(::chown(job_dir.c_str(), 65534, 65534) == 0);
  const std::string dangling = victims + "/created_by_root";
  const std::string existing = victims + "/shadow";
  Write(existing, "root's precious file\n");
  const std::string bad = job_dir + "/trace_rank0_step5.json";   // a link: refused
  const std::string good = job_dir + "/trace_rank1_step5.json";  // sent; link raced in
  const bool unprivileged = AsNobody([&] {
    Write(good, Trace(3000));
    if (::symlink(existing.c_str(), bad.c_str()) != 0) ::_exit(4);
    // Where the refusal marker of the link will be written: a dangling link to a new file.
    if (::symlink(dangling.c_str(), (bad + ".refused").c_str()) != 0) ::_exit(5);
  });
  // Between the sidecar's check for good's marker and its write, the trainer plants a link.
  sender.during = [&] {
    AsNobody([&] {
      if (::symlink(existing.c_str(), (good + ".uploaded").c_str()) != 0) ::_exit(6);
    });
  };
  CaptureUploaderOptions options;
  options.directory = node_dir;
  CaptureUploader uploader(options, [&](const std::string&) { return &sender; });
  uploader.UploadPass();
  uploader.UploadPass();
  INFO("links planted by " << (unprivileged ? "nobody (65534)" : "this test's own user"));
  CHECK_FALSE(Exists(dangling));                       // nothing created through the link
  CHECK(Slurp(existing) == "root's precious file\n");  // nothing truncated through the link
  CHECK(store.Files("job1").size() == 1);              // good was sent, once
  CHECK(sender.calls == 1);
}

TEST_CASE("capture uploader: a job folder that is a link is never entered (issue 28, attack 2)") {
  const std::string node_dir = TempDir();
  const std::string foreign = TempDir();  // e.g. a 0700 folder of root's
  Write(foreign + "/trace_rank0_step5.json", Trace(500));
  REQUIRE(::symlink(foreign.c_str(), (node_dir + "/job1").c_str()) == 0);
  CaptureStore store({.root = TempDir()});
  REQUIRE(store.Open().ok());
  StoreSender sender(&store);
  CaptureUploaderOptions options;
  options.directory = node_dir;
  std::vector<std::string> log;
  CaptureUploader uploader(
      options, [&](const std::string&) { return &sender; },
      [&](const std::string& line) { log.push_back(line); });
  CHECK(uploader.UploadPass() == 0);
  CHECK(uploader.UploadPass() == 0);
  CHECK(sender.calls == 0);
  CHECK(uploader.counters().jobs_refused == 2);
  REQUIRE(log.size() == 1);  // said once
  CHECK_THAT(log[0], Catch::Contains("job1") && Catch::Contains("symbolic link"));
  CHECK_FALSE(Exists(foreign + "/trace_rank0_step5.json.refused"));  // no marker written there
  CHECK_FALSE(Exists(foreign + "/trace_rank0_step5.json.uploaded"));
}

TEST_CASE("capture uploader: a capture directory that is a link is refused") {
  const std::string real = TempDir();
  REQUIRE(::mkdir((real + "/job1").c_str(), 0700) == 0);
  Write(real + "/job1/trace_rank0_step5.json", Trace(500));
  const std::string link = TempDir() + "/captures";
  REQUIRE(::symlink(real.c_str(), link.c_str()) == 0);
  CaptureStore store({.root = TempDir()});
  REQUIRE(store.Open().ok());
  StoreSender sender(&store);
  CaptureUploaderOptions options;
  options.directory = link;
  CaptureUploader uploader(options, [&](const std::string&) { return &sender; });
  CHECK(uploader.UploadPass() == 0);
  CHECK(sender.calls == 0);
}

TEST_CASE("capture uploader: only files of the job's own user are sent") {
  if (::geteuid() != 0) {
    WARN("not root: cannot give a file to another user; skipped");
    return;
  }
  const std::string node_dir = TempDir();
  const std::string seg_dir = TempDir();
  CaptureStore store({.root = TempDir()});
  REQUIRE(store.Open().ok());
  StoreSender sender(&store);
  REQUIRE(::mkdir((node_dir + "/job1").c_str(), 0755) == 0);
  REQUIRE(::chown((node_dir + "/job1").c_str(), 65534, 65534) == 0);
  // A trainer of nobody's, with its segment; one file is root's (a hard link would be, too).
  Write(shm::SegmentPath(seg_dir, "job1"), "segment");
  REQUIRE(::chown(shm::SegmentPath(seg_dir, "job1").c_str(), 65534, 65534) == 0);
  Write(node_dir + "/job1/trace_rank0_step5.json", Trace(500));
  REQUIRE(::chown((node_dir + "/job1/trace_rank0_step5.json").c_str(), 65534, 65534) == 0);
  Write(node_dir + "/job1/trace_rank1_step5.json", Trace(500));  // root's
  CaptureUploaderOptions options;
  options.directory = node_dir;
  options.segment_dir = seg_dir;
  CaptureUploader uploader(options, [&](const std::string&) { return &sender; });
  CHECK(uploader.UploadPass() == 2);
  REQUIRE(store.Files("job1").size() == 1);
  CHECK(store.Files("job1")[0].rank == 0);
  CHECK_THAT(Slurp(node_dir + "/job1/trace_rank1_step5.json.refused"),
             Catch::Contains("owned by uid 0, not by the job's user (uid 65534)"));

  SECTION("a folder not of the segment's user is not entered") {
    REQUIRE(::chown(shm::SegmentPath(seg_dir, "job1").c_str(), 1234, 1234) == 0);
    Write(node_dir + "/job1/trace_rank2_step5.json", Trace(500));
    CHECK(uploader.UploadPass() == 0);
    CHECK(uploader.counters().jobs_refused == 1);
  }
  SECTION("a segment the sidecar made itself (--create-job): the folder's owner is the user") {
    REQUIRE(::chown(shm::SegmentPath(seg_dir, "job1").c_str(), 0, 0) == 0);  // root: ours
    Write(node_dir + "/job1/trace_rank2_step5.json", Trace(500));
    REQUIRE(::chown((node_dir + "/job1/trace_rank2_step5.json").c_str(), 65534, 65534) == 0);
    CHECK(uploader.UploadPass() == 1);
    CHECK(store.Files("job1").size() == 2);
  }
  SECTION("nor a folder whose job has no segment on this node") {
    REQUIRE(::unlink(shm::SegmentPath(seg_dir, "job1").c_str()) == 0);
    Write(node_dir + "/job1/trace_rank2_step5.json", Trace(500));
    CHECK(uploader.UploadPass() == 0);
    CHECK(uploader.counters().jobs_refused == 1);
  }
}

}  // namespace
}  // namespace stagefrontier
