// The sidecar's stack-dump signal to a trainer (owner_signal.h): the /proc parsers on strings,
// refusals through a fake /proc tree (uids, zombie, SigCgt), and real children: one that takes
// SIGUSR2, ones that do not catch it (default action, ignored, blocked), a zombie, and slots
// that name a bad signal or pid. No refused child ever sees a signal, nor is killed by one.
#include "daemon/sidecar/owner_signal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "shm/segment_file.h"
#include "shm/slot_ownership.h"
#include "tests/test_files.h"

namespace stagefrontier {
namespace {

int g_signal_fd = -1;  // in a child: where its handler writes

void OnSignal(int) {
  const char c = 'S';
  (void)!::write(g_signal_fd, &c, 1);
}

// How a child treats `sig`: a handler that writes to a pipe, or no handler at all.
enum class Disposition { kCatch, kDefault, kIgnore, kBlock };

// A forked child that writes a byte to a pipe for each `sig` it takes (kCatch; otherwise the
// signal keeps its default action, is ignored, or is blocked with its default action), and
// otherwise sleeps.
struct Child {
  pid_t pid = -1;
  int signals = -1;  // read end

  explicit Child(int sig, Disposition d = Disposition::kCatch) {
    int ready[2];
    int sigs[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(sigs) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      g_signal_fd = sigs[1];
      struct sigaction sa {};
      sa.sa_handler = d == Disposition::kCatch    ? OnSignal
                      : d == Disposition::kIgnore ? SIG_IGN
                                                  : SIG_DFL;
      sigemptyset(&sa.sa_mask);
      ::sigaction(sig, &sa, nullptr);
      if (d == Disposition::kBlock) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        ::sigprocmask(SIG_BLOCK, &set, nullptr);
      }
      const char c = 'R';
      (void)!::write(ready[1], &c, 1);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    ::close(sigs[1]);
    char c = 0;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    ::close(ready[0]);
    signals = sigs[0];
  }
  ~Child() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::close(signals);
  }
  // Whether the child took a signal within `ms`.
  bool Signalled(int ms) const {
    pollfd p{signals, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) return false;
    char c = 0;
    return ::read(signals, &c, 1) == 1;
  }
  bool Alive() const {
    int status = 0;
    return ::waitpid(pid, &status, WNOHANG) == 0;
  }
};

struct Segment {
  std::unique_ptr<shm::MappedSegment> mapped;
  struct stat st {};
};

Segment MakeSegment(const std::string& dir, const std::string& job) {
  shm::SegmentOptions o;
  o.dir = dir;
  o.job_id = job;
  o.slot_count = 1;
  o.ring_capacity = 16;
  auto seg = shm::MappedSegment::OpenOrCreate(o);
  REQUIRE(seg.ok());
  Segment s;
  s.mapped = *std::move(seg);
  REQUIRE(::stat(s.mapped->path().c_str(), &s.st) == 0);
  return s;
}

OwnerSignalTarget TargetFor(pid_t pid, const Segment& seg, int sig) {
  OwnerSignalTarget t;
  t.pid = static_cast<uint32_t>(pid);
  t.pid_ns = shm::CurrentPidNamespace();
  t.signal_number = sig;
  t.segment_uid = seg.st.st_uid;
  return t;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// SigCgt with SIGUSR1 (bit 9) and SIGINT (bit 1) caught, as the kernel prints it.
constexpr char kCatchesUsr1[] = "0000000000000202";

// A status file as the kernel writes it; `sigcgt` nullptr: no SigCgt line.
std::string StatusText(char state, const std::string& uids, const char* sigcgt = kCatchesUsr1) {
  return absl::StrCat("Name:\tpython3\nUmask:\t0022\nState:\t", std::string(1, state),
                      " (sleeping)\nTgid:\t77\nPid:\t77\nUid:\t", uids,
                      "\nGid:\t0\t0\t0\t0\nSigQ:\t0/63431\nSigPnd:\t0000000000000000\n"
                      "ShdPnd:\t0000000000000000\nSigBlk:\t0000000000000800\n"
                      "SigIgn:\t0000000001001000\n",
                      sigcgt != nullptr ? absl::StrCat("SigCgt:\t", sigcgt, "\n") : "",
                      "CapInh:\t0000000000000000\n");
}

TEST_CASE("status and fdinfo parsers") {
  ProcStatus st;
  REQUIRE(ParseProcStatus(StatusText('S', "1000\t1001\t1002\t1003"), &st));
  CHECK(st.state == 'S');
  CHECK(st.has_uids);
  CHECK(st.real_uid == 1000);
  CHECK(st.effective_uid == 1001);
  CHECK(st.saved_uid == 1002);
  CHECK(st.has_sigcgt);
  CHECK(st.sig_caught == 0x202);
  CHECK(CatchesSignal(st, SIGUSR1));
  CHECK(CatchesSignal(st, SIGINT));
  CHECK_FALSE(CatchesSignal(st, SIGUSR2));  // blocked (SigBlk) is not caught
  CHECK_FALSE(CatchesSignal(st, SIGHUP));
  CHECK_FALSE(CatchesSignal(st, 0));
  CHECK_FALSE(CatchesSignal(st, 65));
  REQUIRE(ParseProcStatus(StatusText('Z', "0\t0\t0\t0", "0000000000000000"), &st));
  CHECK(st.state == 'Z');
  CHECK(st.has_sigcgt);
  CHECK_FALSE(CatchesSignal(st, SIGUSR1));
  // The highest signal, and more than 64 signals (the lowest come last).
  REQUIRE(ParseProcStatus(StatusText('S', "0\t0\t0\t0", "8000000000000800"), &st));
  CHECK(CatchesSignal(st, 64));
  CHECK(CatchesSignal(st, SIGUSR2));
  REQUIRE(ParseProcStatus(StatusText('S', "0\t0\t0\t0", "ffff0000000000000000000000000800"), &st));
  CHECK(st.sig_caught == 0x800);
  // No SigCgt line: parsed, but nothing is known to be caught.
  REQUIRE(ParseProcStatus(StatusText('S', "0\t0\t0\t0", nullptr), &st));
  CHECK_FALSE(st.has_sigcgt);
  CHECK_FALSE(CatchesSignal(st, SIGUSR1));
  // A malformed SigCgt line: not parsed.
  for (const char* bad : {"", "0x800", "00000000000008g0", "-800"}) {
    INFO(bad);
    CHECK_FALSE(ParseProcStatus(StatusText('S', "0\t0\t0\t0", bad), &st));
  }
  CHECK_FALSE(ParseProcStatus("Name:\tx\nUid:\t0\t0\t0\t0\n", &st));        // no State
  CHECK_FALSE(ParseProcStatus("State:\tS (sleeping)\n", &st));              // no Uid
  CHECK_FALSE(ParseProcStatus("State:\tS (sleeping)\nUid:\t0\t0\n", &st));  // two uids
  CHECK_FALSE(ParseProcStatus("State:\tS (sleeping)\nUid:\t0\tx\t0\t0\n", &st));
  CHECK_FALSE(ParseProcStatus("", &st));
  // A name with "Uid:" or "SigCgt:" in it does not start a line (the kernel escapes newlines).
  REQUIRE(ParseProcStatus(
      "Name:\tUid: 5 5 5 SigCgt: 800\nState:\tR (running)\nUid:\t7\t7\t7\t7\nSigCgt:\t0200\n",
      &st));
  CHECK(st.real_uid == 7);
  CHECK(st.sig_caught == 0x200);

  int64_t pid = 0;
  REQUIRE(ParsePidfdFdinfoPid("pos:\t0\nflags:\t02000002\nmnt_id:\t15\nPid:\t123\nNSpid:\t123\n",
                              &pid));
  CHECK(pid == 123);
  REQUIRE(ParsePidfdFdinfoPid("Pid:\t-1\n", &pid));
  CHECK(pid == -1);
  CHECK_FALSE(ParsePidfdFdinfoPid("pos:\t0\n", &pid));
}

TEST_CASE("a real trainer that catches the signal is signalled; others are refused") {
  const std::string dir = testing::TempDir("sf_owner_signal");
  const Segment seg = MakeSegment(dir, "job");
  Child child(SIGUSR2);

  // It catches SIGUSR2, not SIGUSR1 (whose default action would kill it): refused.
  absl::Status s = SignalSegmentUser(TargetFor(child.pid, seg, SIGUSR1));
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains(absl::StrCat("its process ", child.pid,
                                          " does not catch SIGUSR1 (no dump handler installed)")));
  CHECK_FALSE(child.Signalled(200));
  CHECK(child.Alive());

  // No dump handler (0), or a signal other than SIGUSR1/2: refused before any system call.
  s = SignalSegmentUser(TargetFor(child.pid, seg, 0));
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("no dump signal"));
  s = SignalSegmentUser(TargetFor(child.pid, seg, SIGKILL));
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("names signal 9"));
  s = SignalSegmentUser(TargetFor(child.pid, seg, SIGTERM));
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_FALSE(child.Signalled(100));
  CHECK(child.Alive());

  // Another PID namespace.
  OwnerSignalTarget t = TargetFor(child.pid, seg, SIGUSR2);
  t.pid_ns += 1;
  s = SignalSegmentUser(t);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("another PID namespace"));
  t.pid_ns = 0;
  CHECK_FALSE(SignalSegmentUser(t).ok());
  CHECK_FALSE(child.Signalled(100));

  // The owner of the segment is not the process's user.
  t = TargetFor(child.pid, seg, SIGUSR2);
  t.segment_uid = 4242;
  s = SignalSegmentUser(t);
  CHECK(s.code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(s.message()), Catch::Contains("not as the segment's owner (uid 4242)"));
  CHECK_FALSE(child.Signalled(100));

  // Regression: a group-writable segment owned by the sidecar's own user (a root sidecar's
  // --create-job segment) let a group member aim the signal at that user's processes.
  t = TargetFor(child.pid, seg, SIGUSR2);
  t.segment_mode = 0660;
  s = SignalSegmentUser(t);
  CHECK(s.code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(std::string(s.message()), Catch::Contains("writable by its group or others"));
  CHECK_FALSE(child.Signalled(100));

  // All checks pass: the child takes the signal.
  s = SignalSegmentUser(TargetFor(child.pid, seg, SIGUSR2));
  INFO(s.ToString());
  CHECK(s.ok());
  CHECK(child.Signalled(2000));
  CHECK(child.Alive());
}

TEST_CASE("a real process that does not catch the signal is refused and not killed") {
  const std::string dir = testing::TempDir("sf_owner_signal");
  const Segment seg = MakeSegment(dir, "job");
  for (Disposition d : {Disposition::kDefault, Disposition::kIgnore, Disposition::kBlock}) {
    INFO("disposition " << static_cast<int>(d));
    Child child(SIGUSR2, d);
    const absl::Status s = SignalSegmentUser(TargetFor(child.pid, seg, SIGUSR2));
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(std::string(s.message()), Catch::Contains("does not catch SIGUSR2"));
    // Had SIGUSR2 been sent with its default action it would have ended the child by now (a
    // blocked one would end it at the unblock; nothing is pending either).
    CHECK_FALSE(child.Signalled(200));
    CHECK(child.Alive());
    std::ifstream status(absl::StrCat("/proc/", child.pid, "/status"));
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0) {
        CHECK_THAT(line, Catch::EndsWith("0000000000000000"));
      }
    }
  }
}

TEST_CASE("pids no trainer can have are refused") {
  const std::string dir = testing::TempDir("sf_owner_signal");
  const Segment seg = MakeSegment(dir, "job");
  for (uint32_t pid : {0U, 1U, kMaxSignalledPid + 1, 0xFFFFFFFFU}) {
    OwnerSignalTarget t = TargetFor(1, seg, SIGUSR2);
    t.pid = pid;
    const absl::Status s = SignalSegmentUser(t);
    CHECK(s.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(s.message()), Catch::Contains("which is no trainer's"));
  }
  // Its own pid: SIGUSR2 would end the sidecar.
  const absl::Status s = SignalSegmentUser(TargetFor(::getpid(), seg, SIGUSR2));
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()), Catch::Contains("own pid"));
  // A pid with no process.
  OwnerSignalTarget gone = TargetFor(kMaxSignalledPid, seg, SIGUSR2);
  CHECK_FALSE(SignalSegmentUser(gone).ok());
}

TEST_CASE("a zombie is refused") {
  const std::string dir = testing::TempDir("sf_owner_signal");
  const Segment seg = MakeSegment(dir, "job");
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(0);
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) == 0);  // not reaped
  const absl::Status s = SignalSegmentUser(TargetFor(pid, seg, SIGUSR2));
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()), Catch::Contains("has exited (state Z)"));
  REQUIRE(::waitpid(pid, nullptr, 0) == pid);
  // Reaped: no process at all.
  CHECK_FALSE(SignalSegmentUser(TargetFor(pid, seg, SIGUSR2)).ok());
}

// A fake /proc: <root>/<pid>/status as written, <root>/self the real /proc/self (the
// pidfd's fdinfo must be the kernel's).
struct FakeProc {
  std::string root = testing::TempDir("sf_fake_proc");
  explicit FakeProc(pid_t pid) {
    REQUIRE(::symlink("/proc/self", (root + "/self").c_str()) == 0);
    REQUIRE(::mkdir(absl::StrCat(root, "/", pid).c_str(), 0755) == 0);
    dir = absl::StrCat(root, "/", pid);
  }
  std::string dir;
};

TEST_CASE("refusals through a fake /proc: uids, state, SigCgt") {
  const std::string tmp = testing::TempDir("sf_owner_signal");
  const Segment seg = MakeSegment(tmp, "job");
  Child child(SIGUSR1);
  FakeProc proc(child.pid);
  OwnerSignalTarget t = TargetFor(child.pid, seg, SIGUSR1);
  t.segment_uid = 1000;
  t.proc_root = proc.root.c_str();

  // Each of real, effective and saved uid must be the segment's owner.
  for (const char* uids : {"0\t1000\t1000\t1000", "1000\t0\t1000\t1000", "1000\t1000\t0\t1000"}) {
    WriteFile(proc.dir + "/status", StatusText('S', uids));
    const absl::Status s = SignalSegmentUser(t);
    CHECK(s.code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(s.message()), Catch::Contains("not as the segment's owner (uid 1000)"));
  }
  for (char state : {'Z', 'X'}) {
    WriteFile(proc.dir + "/status", StatusText(state, "1000\t1000\t1000\t1000"));
    CHECK(SignalSegmentUser(t).code() == absl::StatusCode::kFailedPrecondition);
  }
  WriteFile(proc.dir + "/status", "garbage");
  CHECK(SignalSegmentUser(t).code() == absl::StatusCode::kUnavailable);
  CHECK_FALSE(child.Signalled(100));

  // SigCgt without the signal's bit (SIGUSR2's only, or none): refused.
  for (const char* sigcgt : {"0000000000000800", "0000000000000000"}) {
    WriteFile(proc.dir + "/status", StatusText('S', "1000\t1000\t1000\t1000", sigcgt));
    const absl::Status s = SignalSegmentUser(t);
    CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
    CHECK_THAT(
        std::string(s.message()),
        Catch::Contains(absl::StrCat("its process ", child.pid,
                                     " does not catch SIGUSR1 (no dump handler installed)")));
  }
  // No SigCgt line, or a malformed one: refused too.
  WriteFile(proc.dir + "/status", StatusText('S', "1000\t1000\t1000\t1000", nullptr));
  absl::Status s = SignalSegmentUser(t);
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(s.message()), Catch::Contains("has no SigCgt line"));
  WriteFile(proc.dir + "/status", StatusText('S', "1000\t1000\t1000\t1000", "zz"));
  CHECK(SignalSegmentUser(t).code() == absl::StatusCode::kUnavailable);
  CHECK_FALSE(child.Signalled(100));

  // A directory for the pid that is a link (to the real one) is not followed.
  FakeProc linked(child.pid);
  REQUIRE(::rmdir(linked.dir.c_str()) == 0);
  REQUIRE(::symlink(absl::StrCat("/proc/", child.pid).c_str(), linked.dir.c_str()) == 0);
  OwnerSignalTarget via_link = TargetFor(child.pid, seg, SIGUSR1);
  via_link.proc_root = linked.root.c_str();
  CHECK_FALSE(SignalSegmentUser(via_link).ok());
  CHECK_FALSE(child.Signalled(100));

  // Everything in order (the fs uid, fourth, is not checked): signalled; the checks read the
  // fake tree.
  WriteFile(proc.dir + "/status", StatusText('S', "1000\t1000\t1000\t0"));
  s = SignalSegmentUser(t);
  INFO(s.ToString());
  CHECK(s.ok());
  CHECK(child.Signalled(2000));
}

}  // namespace
}  // namespace stagefrontier
