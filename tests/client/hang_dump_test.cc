// Hang dumps (client/hang_dump.h) end to end: a real segment, a real signal, a real file.
#include "client/hang_dump.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "shm/segment_file.h"
#include "tests/shm/test_support.h"

namespace stagefrontier {
namespace {

using stagefrontier::testing::MakeTempDir;
using stagefrontier::testing::ReadFile;
using std::chrono::milliseconds;

const std::vector<Stage> kStages = {{"data", StageKind::kIo}, {"forward", StageKind::kCompute}};
const GetEnv kNoEnv = [](const char*) -> const char* { return nullptr; };

ClientOptions Options(const std::string& dir) {
  ClientOptions o;
  o.shm_dir = dir;
  o.job_id = "test";
  o.rank = 3;
  o.local_rank = 0;
  o.world_size = 4;
  o.local_world_size = 1;
  o.ring_capacity = 8;
  o.quiet = true;
  return o;
}

// A client on a fresh segment, and a second mapping of that segment to play the sidecar.
struct Fixture {
  std::string dir = MakeTempDir();
  std::unique_ptr<Client> client;
  std::unique_ptr<shm::MappedSegment> seg;
  shm::v1::SlotHeader* slot = nullptr;

  Fixture() {
    auto c = Client::Create(kStages, Options(dir), kNoEnv);
    REQUIRE(c.ok());
    client = *std::move(c);
    REQUIRE(client->enabled());
    auto s = shm::MappedSegment::Attach(shm::SegmentPath(dir, "test"));
    REQUIRE(s.ok());
    seg = *std::move(s);
    slot = &seg->view().slot(0);
  }
  HangDumpOptions Dumps() const {
    HangDumpOptions o;
    o.directory = dir + "/captures";
    return o;
  }
  std::string JobDir() const { return dir + "/captures/test"; }
  std::string DumpPath(uint64_t id) const {
    return JobDir() + "/stacks_rank3_capture" + std::to_string(id) + ".txt";
  }
};

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    closedir(d);
  }
  return out;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

struct sigaction Disposition(int sig) {
  struct sigaction a;
  sigaction(sig, nullptr, &a);
  return a;
}

bool Same(const HangDumpWait& w, uint64_t capture_id, uint64_t count) {
  return w.capture_id == capture_id && w.count == count;
}

// Sets the umask for the scope (the dumper's thread creates the files meanwhile).
struct ScopedUmask {
  explicit ScopedUmask(mode_t m) : old(umask(m)) {}
  ~ScopedUmask() { umask(old); }
  mode_t old;
};

TEST_CASE("a requested dump: the signal, the file, the answer") {
  Fixture f;
  // A sidecar in the trainer's group (setgid folders, umask 007) must read the files: modes
  // are 0777/0666 less the umask, as capture.py's os.makedirs and open.
  constexpr mode_t kMask = 007;
  ScopedUmask mask(kMask);
  f.client->BeginStep(12);
  f.client->Enter(1);
  REQUIRE(f.client->EnableHangDumps(f.Dumps()).ok());
  CHECK(f.slot->dump_signal.load() == SIGUSR2);
  CHECK(f.client->hang_dump_signal_fd() >= 0);
  CHECK(f.client->EnableHangDumps(f.Dumps()).code() == absl::StatusCode::kAlreadyExists);

  f.slot->dump_request_id.store(7);
  REQUIRE(raise(SIGUSR2) == 0);
  CHECK(Same(f.client->WaitForHangDump(milliseconds(5000), 0), 7, 1));
  const std::string text = ReadFile(f.DumpPath(7));
  CHECK(Contains(text, "# job: test\n"));
  CHECK(Contains(text, "# rank: 3\n"));
  CHECK(Contains(text, "# pid: " + std::to_string(getpid()) + "\n"));
  CHECK(Contains(text, "# capture id: 7\n"));
  CHECK(Contains(text, "# open stage: forward\n# open step: 12\n"));
  CHECK(Contains(text, "# wall time: "));
  CHECK(Contains(text, "\nstagefrontier: stack dump requested\n"));
  CHECK(f.slot->dump_answered_id.load() == 7);
  CHECK(ListDir(f.JobDir()) == std::vector<std::string>{"stacks_rank3_capture7.txt"});
  struct stat st;
  REQUIRE(stat(f.DumpPath(7).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == (0666 & ~kMask));
  REQUIRE(stat(f.JobDir().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == (0777 & ~kMask));
  REQUIRE(stat((f.dir + "/captures").c_str(), &st) == 0);  // made by the dumper too
  CHECK((st.st_mode & 0777) == (0777 & ~kMask));
  CHECK(f.client->stats().dumps_written == 1);

  // The same id again is no request (answered already): stderr, counted, no file.
  REQUIRE(raise(SIGUSR2) == 0);
  for (int i = 0; i < 500 && f.client->stats().dumps_unrequested == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  CHECK(f.client->stats().dumps_unrequested == 1);
  CHECK(f.client->stats().dumps_written == 1);
  CHECK(ListDir(f.JobDir()).size() == 1);
  CHECK(f.client->stats().dump_errors == 0);
  CHECK(Same(f.client->WaitForHangDump(milliseconds(0), 1), 0, 1));  // no second dump
}

TEST_CASE("the callback's text lands in the file; a throwing callback is noted, not fatal") {
  Fixture f;
  HangDumpOptions o = f.Dumps();
  std::atomic<uint64_t> seen_id{0};  // written on the dumper's thread
  o.callback = [&](const HangDumpRequest& r, int fd) {
    seen_id = r.capture_id;
    const std::string s = "runtime state of job " + r.job + "\n";
    if (write(fd, s.data(), s.size()) != static_cast<ssize_t>(s.size())) return;
    if (r.capture_id == 9) throw std::runtime_error("boom");
  };
  REQUIRE(f.client->EnableHangDumps(std::move(o)).ok());
  f.slot->dump_request_id.store(8);
  REQUIRE(raise(SIGUSR2) == 0);
  REQUIRE(Same(f.client->WaitForHangDump(milliseconds(5000), 0), 8, 1));
  CHECK(seen_id == 8);
  CHECK(Contains(ReadFile(f.DumpPath(8)),
                 "stagefrontier: stack dump requested\n# from the trainer's callback:\n"
                 "runtime state of job test\n"));

  f.slot->dump_request_id.store(9);
  REQUIRE(raise(SIGUSR2) == 0);
  REQUIRE(Same(f.client->WaitForHangDump(milliseconds(5000), 1), 9, 2));
  const std::string text = ReadFile(f.DumpPath(9));
  CHECK(Contains(text, "runtime state of job test\n"));
  CHECK(Contains(text, "# callback threw: boom\n"));
  CHECK(f.slot->dump_answered_id.load() == 9);
  CHECK(f.client->stats().dumps_written == 2);
}

// Regression: the dump went through the job folder's path: a link planted there (another
// user's, in a shared capture directory) had the trainer write and rename files in the folder
// it named.
TEST_CASE("a job folder that is a link is not written through: the dump fails, counted") {
  Fixture f;
  const std::string elsewhere = f.dir + "/elsewhere";
  REQUIRE(mkdir(elsewhere.c_str(), 0700) == 0);
  REQUIRE(mkdir((f.dir + "/captures").c_str(), 0700) == 0);
  REQUIRE(symlink(elsewhere.c_str(), f.JobDir().c_str()) == 0);
  REQUIRE(f.client->EnableHangDumps(f.Dumps()).ok());
  f.slot->dump_request_id.store(5);
  REQUIRE(raise(SIGUSR2) == 0);
  for (int i = 0; i < 500 && f.client->stats().dump_errors == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  CHECK(f.client->stats().dump_errors == 1);
  CHECK(f.client->stats().dumps_written == 0);
  CHECK(ListDir(elsewhere).empty());
}

TEST_CASE("a signal without a request writes nothing and is counted") {
  Fixture f;
  REQUIRE(f.client->EnableHangDumps(f.Dumps()).ok());
  REQUIRE(raise(SIGUSR2) == 0);
  CHECK(Same(f.client->WaitForHangDump(milliseconds(400), 0), 0, 0));
  for (int i = 0; i < 500 && f.client->stats().dumps_unrequested == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  CHECK(f.client->stats().dumps_unrequested == 1);
  CHECK(f.client->stats().dumps_written == 0);
  CHECK(ListDir(f.JobDir()).empty());
  CHECK(f.slot->dump_answered_id.load() == 0);
}

TEST_CASE("refused: other signals, a handler already there, a client not recording") {
  Fixture f;
  for (int sig : {SIGKILL, SIGINT, SIGTERM, SIGSEGV, 0}) {
    HangDumpOptions o = f.Dumps();
    o.signal_number = sig;
    CHECK(f.client->EnableHangDumps(o).code() == absl::StatusCode::kInvalidArgument);
  }
  struct sigaction mine;
  std::memset(&mine, 0, sizeof mine);
  mine.sa_handler = [](int) {};
  struct sigaction before;
  REQUIRE(sigaction(SIGUSR1, &mine, &before) == 0);
  HangDumpOptions o = f.Dumps();
  o.signal_number = SIGUSR1;
  const absl::Status s = f.client->EnableHangDumps(o);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(Contains(std::string(s.message()), "SIGUSR1"));
  CHECK(Disposition(SIGUSR1).sa_handler == mine.sa_handler);  // left alone
  CHECK(f.slot->dump_signal.load() == 0);
  CHECK(f.client->hang_dump_signal_fd() == -1);
  // Without our handler too: the handler there (the script's own faulthandler, one installed
  // from C) would be replaced by the caller's handler, or be given the pipe's signals.
  o.install_handler = false;
  const absl::Status own = f.client->EnableHangDumps(o);
  CHECK(own.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(Contains(std::string(own.message()), "SIGUSR1"));
  CHECK(Disposition(SIGUSR1).sa_handler == mine.sa_handler);
  CHECK(f.client->hang_dump_signal_fd() == -1);
  CHECK(f.client->PublishHangDumps().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(f.client->UnpublishHangDumps().code() == absl::StatusCode::kFailedPrecondition);
  // An SA_SIGINFO handler is a handler as well.
  struct sigaction info;
  std::memset(&info, 0, sizeof info);
  info.sa_flags = SA_SIGINFO;
  info.sa_sigaction = [](int, siginfo_t*, void*) {};
  REQUIRE(sigaction(SIGUSR1, &info, nullptr) == 0);
  CHECK(f.client->EnableHangDumps(o).code() == absl::StatusCode::kFailedPrecondition);
  // With the default action back, enabled before the trainer's handler is installed.
  REQUIRE(sigaction(SIGUSR1, &before, nullptr) == 0);
  CHECK(f.client->EnableHangDumps(o).ok());
  CHECK(f.slot->dump_signal.load() == 0);  // not before the trainer's handler is in place
  CHECK(f.client->PublishHangDumps().ok());
  CHECK(f.slot->dump_signal.load() == SIGUSR1);
  // Unpublished before the trainer removes its handler; published again later.
  CHECK(f.client->UnpublishHangDumps().ok());
  CHECK(f.slot->dump_signal.load() == 0);
  CHECK(f.client->PublishHangDumps().ok());
  CHECK(f.slot->dump_signal.load() == SIGUSR1);
  f.client->Close();
  CHECK(f.slot->dump_signal.load() == 0);
  CHECK(f.client->UnpublishHangDumps().ok());  // closed: nothing to undo
  CHECK(f.client->PublishHangDumps().code() == absl::StatusCode::kFailedPrecondition);

  ClientOptions off = Options(f.dir + "/missing");
  auto disabled = Client::Create(kStages, off, kNoEnv);
  REQUIRE(disabled.ok());
  CHECK((*disabled)->EnableHangDumps(f.Dumps()).code() == absl::StatusCode::kFailedPrecondition);
  CHECK(Same((*disabled)->WaitForHangDump(milliseconds(1), 0), 0, 0));
}

TEST_CASE("Close clears dump_signal first and restores the old disposition") {
  Fixture f;
  struct sigaction ignore;
  std::memset(&ignore, 0, sizeof ignore);
  ignore.sa_handler = SIG_IGN;
  struct sigaction before;
  REQUIRE(sigaction(SIGUSR2, &ignore, &before) == 0);
  REQUIRE(f.client->EnableHangDumps(f.Dumps()).ok());
  CHECK(Disposition(SIGUSR2).sa_handler != SIG_IGN);
  CHECK(f.slot->dump_signal.load() == SIGUSR2);
  f.client->Close();
  CHECK(f.slot->dump_signal.load() == 0);
  CHECK(Disposition(SIGUSR2).sa_handler == SIG_IGN);
  CHECK(f.client->hang_dump_signal_fd() == -1);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(Same(f.client->WaitForHangDump(milliseconds(5000), 0), 0, 0));  // at once: closed
  CHECK(std::chrono::steady_clock::now() - t0 < milliseconds(2000));
  REQUIRE(sigaction(SIGUSR2, &before, nullptr) == 0);
  CHECK(Disposition(SIGUSR2).sa_handler == SIG_DFL);
  // Enabled again by a new client: the handler can be installed again.
  f.client.reset();
  auto c = Client::Create(kStages, Options(f.dir), kNoEnv);
  REQUIRE(c.ok());
  CHECK((*c)->EnableHangDumps(f.Dumps()).ok());
}

TEST_CASE("the caller's own handler: text written into signal_fd() becomes the dump") {
  Fixture f;
  HangDumpOptions o = f.Dumps();
  o.install_handler = false;
  REQUIRE(f.client->EnableHangDumps(o).ok());
  CHECK(Disposition(SIGUSR2).sa_handler == SIG_DFL);  // not ours to install
  CHECK(f.slot->dump_signal.load() == 0);             // nor published before Publish
  REQUIRE(f.client->PublishHangDumps().ok());
  CHECK(f.slot->dump_signal.load() == SIGUSR2);
  const int fd = f.client->hang_dump_signal_fd();
  REQUIRE(fd >= 0);
  CHECK((fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);  // a handler never blocks on a full pipe
  f.slot->dump_request_id.store(11);
  const std::string stacks =
      "Thread 0x00007f (most recent call first):\n  File \"train.py\", line 3 in step\n";
  REQUIRE(write(fd, stacks.data(), stacks.size()) == static_cast<ssize_t>(stacks.size()));
  REQUIRE(Same(f.client->WaitForHangDump(milliseconds(5000), 0), 11, 1));
  const std::string text = ReadFile(f.DumpPath(11));
  CHECK(Contains(text, "# capture id: 11\n"));
  CHECK(Contains(text, stacks));
  CHECK(f.slot->dump_answered_id.load() == 11);
}

TEST_CASE("a forked child neither answers nor clears the parent's dump signal") {
  Fixture f;
  REQUIRE(f.client->EnableHangDumps(f.Dumps()).ok());
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    raise(SIGUSR2);  // the child's copy of the handler writes nothing into the parent's pipe
    f.client->Close();
    _exit(f.client->hang_dump_signal_fd() == -1 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(f.slot->dump_signal.load() == SIGUSR2);
  std::this_thread::sleep_for(milliseconds(300));
  CHECK(f.client->stats().dumps_unrequested == 0);
  f.slot->dump_request_id.store(5);
  REQUIRE(raise(SIGUSR2) == 0);
  CHECK(Same(f.client->WaitForHangDump(milliseconds(5000), 0), 5, 1));
}

TEST_CASE("no dump is lost between two waits: the count says what was missed") {
  Fixture f;
  REQUIRE(f.client->EnableHangDumps(f.Dumps()).ok());
  CHECK(Same(f.client->WaitForHangDump(milliseconds(0), 0), 0, 0));
  for (uint64_t id : {21, 22}) {  // both complete before anyone waits
    f.slot->dump_request_id.store(id);
    REQUIRE(raise(SIGUSR2) == 0);
    for (int i = 0; i < 1000 && f.client->stats().dumps_written < id - 20; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    REQUIRE(f.client->stats().dumps_written == id - 20);
  }
  // At once: the count is past `after` already; the newest id.
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(Same(f.client->WaitForHangDump(milliseconds(5000), 0), 22, 2));
  CHECK(Same(f.client->WaitForHangDump(milliseconds(5000), 1), 22, 2));
  CHECK(std::chrono::steady_clock::now() - t0 < milliseconds(2000));
  CHECK(Same(f.client->WaitForHangDump(milliseconds(50), 2), 0, 2));  // timed out
  f.client->Close();
  CHECK(Same(f.client->WaitForHangDump(milliseconds(5000), 1), 22, 2));  // still told
  CHECK(Same(f.client->WaitForHangDump(milliseconds(5000), 2), 0, 2));   // closed: at once
}

TEST_CASE("a full pipe never blocks the signalled thread: the write end is non-blocking") {
  Fixture f;
  HangDumpOptions o = f.Dumps();
  std::atomic<bool> in_callback{false};
  std::atomic<bool> release{false};
  o.callback = [&](const HangDumpRequest& r, int) {
    if (r.capture_id != 1) return;
    in_callback = true;  // the dumper stops reading the pipe meanwhile
    while (!release) std::this_thread::sleep_for(milliseconds(1));
  };
  REQUIRE(f.client->EnableHangDumps(std::move(o)).ok());
  const int fd = f.client->hang_dump_signal_fd();
  REQUIRE((fcntl(fd, F_GETFL) & O_NONBLOCK) != 0);  // else the steps below would hang
  f.slot->dump_request_id.store(1);
  REQUIRE(raise(SIGUSR2) == 0);
  for (int i = 0; i < 1000 && !in_callback; ++i) std::this_thread::sleep_for(milliseconds(10));
  REQUIRE(in_callback);
  f.slot->dump_request_id.store(2);
  // Fill the pipe (1 MiB, or the default 64 KiB) while nobody reads it.
  const std::string chunk(4096, 'x');
  size_t filled = 0;
  int last_errno = 0;
  for (int i = 0; i < 16 * 1024; ++i) {
    const ssize_t w = write(fd, chunk.data(), chunk.size());
    if (w < 0) {
      last_errno = errno;
      break;
    }
    filled += static_cast<size_t>(w);
  }
  CHECK(last_errno == EAGAIN);
  CHECK(filled >= 4096);
  // The handler's write fails, and the signalled thread goes on at once.
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(raise(SIGUSR2) == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < milliseconds(1000));
  release = true;
  CHECK(f.client->WaitForHangDump(milliseconds(5000), 0).count >= 1);  // the callback's dump
  // What was in the pipe becomes the next dump; the lost line is simply absent.
  REQUIRE(Same(f.client->WaitForHangDump(milliseconds(15000), 1), 2, 2));
  const std::string text = ReadFile(f.DumpPath(2));
  CHECK(text.find(std::string(filled, 'x')) != std::string::npos);
  CHECK(f.client->stats().dumps_unrequested == 0);
  CHECK(f.client->stats().dump_errors == 0);
}

TEST_CASE("the capture directory rule") {
  unsetenv("STAGEFRONTIER_CAPTURE_DIR");
  CHECK(DefaultCaptureDirectory("/x") == "/x/stagefrontier-captures");
  setenv("STAGEFRONTIER_CAPTURE_DIR", "/y", 1);
  CHECK(DefaultCaptureDirectory("/x") == "/y");
  unsetenv("STAGEFRONTIER_CAPTURE_DIR");
}

}  // namespace
}  // namespace stagefrontier
