#include "daemon/sidecar/capture_uploader.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/captures/capture_store.h"

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

}  // namespace
}  // namespace stagefrontier
