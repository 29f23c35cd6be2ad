#include "daemon/sidecar/owner_signal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/common/untrusted_dir.h"
#include "shm/slot_ownership.h"

namespace stagefrontier {
namespace {

// At most this much of /proc/<pid>/status and of the pidfd's fdinfo is read.
constexpr size_t kMaxStatusBytes = 64 << 10;
constexpr size_t kMaxFdinfoBytes = 4 << 10;

// Reads up to `max` bytes of `fd` into *out. Returns 0 or the errno of a failed read.
int ReadUpTo(int fd, size_t max, std::string* out) {
  out->clear();
  char buf[4096];
  while (out->size() < max) {
    const ssize_t n = ::read(fd, buf, std::min(sizeof(buf), max - out->size()));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  return 0;
}

// The rest of the first line of `text` that starts with `key`, without leading blanks.
bool LineValue(absl::string_view text, absl::string_view key, absl::string_view* value) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, key)) continue;
    *value = absl::StripLeadingAsciiWhitespace(line);
    return true;
  }
  return false;
}

std::string Errno(int err) { return std::strerror(err); }

}  // namespace

bool ParseProcStatus(absl::string_view text, ProcStatus* out) {
  *out = ProcStatus{};
  absl::string_view state;
  if (!LineValue(text, "State:", &state) || state.empty()) return false;
  out->state = state.front();
  absl::string_view uids;
  if (!LineValue(text, "Uid:", &uids)) return false;
  std::vector<absl::string_view> ids =
      absl::StrSplit(uids, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (ids.size() < 3) return false;
  uint32_t v[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    if (!absl::SimpleAtoi(ids[i], &v[i])) return false;
  }
  out->real_uid = v[0];
  out->effective_uid = v[1];
  out->saved_uid = v[2];
  out->has_uids = true;
  absl::string_view sigcgt;
  if (!LineValue(text, "SigCgt:", &sigcgt)) return true;  // has_sigcgt stays false
  sigcgt = absl::StripTrailingAsciiWhitespace(sigcgt);
  // 16 hex digits for 64 signals; more where a kernel has more (the lowest signals come last).
  if (sigcgt.empty() || sigcgt.size() > 64 ||
      !std::all_of(sigcgt.begin(), sigcgt.end(), [](char c) { return absl::ascii_isxdigit(c); })) {
    return false;
  }
  if (sigcgt.size() > 16) sigcgt.remove_prefix(sigcgt.size() - 16);
  if (!absl::SimpleHexAtoi(sigcgt, &out->sig_caught)) return false;
  out->has_sigcgt = true;
  return true;
}

bool CatchesSignal(const ProcStatus& st, int sig) {
  return st.has_sigcgt && sig >= 1 && sig <= 64 && ((st.sig_caught >> (sig - 1)) & 1U) != 0;
}

bool ParsePidfdFdinfoPid(absl::string_view text, int64_t* pid) {
  absl::string_view value;
  if (!LineValue(text, "Pid:", &value)) return false;
  const size_t end = value.find_first_of(" \t");
  return absl::SimpleAtoi(value.substr(0, end), pid);
}

namespace {

// 1. What the slot says, before any system call.
absl::Status CheckSlotClaims(const OwnerSignalTarget& t) {
  if (t.signal_number == 0) {
    return absl::FailedPreconditionError("its trainer names no dump signal (no dump handler)");
  }
  if (t.signal_number != SIGUSR1 && t.signal_number != SIGUSR2) {
    return absl::InvalidArgumentError(absl::StrCat("its slot names signal ", t.signal_number,
                                                   "; only SIGUSR1 (", SIGUSR1, ") and SIGUSR2 (",
                                                   SIGUSR2, ") are sent"));
  }
  if (t.pid < 2 || t.pid > kMaxSignalledPid) {
    return absl::InvalidArgumentError(
        absl::StrCat("its slot names pid ", t.pid, ", which is no trainer's"));
  }
  if (t.pid == static_cast<uint32_t>(::getpid())) {
    return absl::InvalidArgumentError(absl::StrCat("its slot names the sidecar's own pid ", t.pid));
  }
  if ((t.segment_mode & (S_IWGRP | S_IWOTH)) != 0 &&
      (t.segment_uid == 0 || t.segment_uid == ::geteuid())) {
    return absl::PermissionDeniedError(absl::StrCat(
        "its segment is writable by its group or others and owned by uid ", t.segment_uid,
        " (root or this sidecar's user): its slot may be another user's writing"));
  }
  const uint64_t own_ns = shm::CurrentPidNamespace();
  if (own_ns == 0) return absl::UnavailableError("cannot read the sidecar's own PID namespace");
  if (t.pid_ns != own_ns) {
    return absl::FailedPreconditionError("the rank's process is in another PID namespace");
  }
  return absl::OkStatus();
}

// 2. A pidfd: every check below and the signal then concern one process.
absl::Status OpenPidfd(const OwnerSignalTarget& t, UniqueFd* out) {
  UniqueFd& pidfd = *out;
#ifdef SYS_pidfd_open
  pidfd = UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(t.pid), 0)));
#else
  errno = ENOSYS;
#endif
  if (pidfd.get() < 0) {
    const int err = errno;
    if (err == ENOSYS) {
      return absl::UnimplementedError("this kernel has no pidfd_open (Linux 5.3 or later)");
    }
    if (err == ESRCH) return absl::NotFoundError(absl::StrCat("no process ", t.pid));
    return absl::UnavailableError(absl::StrCat("pidfd_open(", t.pid, "): ", Errno(err)));
  }
  return absl::OkStatus();
}

// 3. Its /proc directory; then the pidfd's fdinfo, read through the same /proc, must name the
//    same pid: the process was alive from pidfd_open to now, so the directory is its (and a
//    /proc of another PID namespace is noticed).
absl::Status OpenProcDir(const OwnerSignalTarget& t, const UniqueFd& pidfd, UniqueFd* out) {
  const std::string dir_path = absl::StrCat(t.proc_root, "/", t.pid);
  UniqueFd& dir = *out;
  dir = UniqueFd(::open(dir_path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.get() < 0) {
    const int err = errno;
    if (err == ENOENT || err == ESRCH) {
      return absl::NotFoundError(absl::StrCat("no process ", t.pid, " in ", t.proc_root));
    }
    return absl::UnavailableError(absl::StrCat("cannot open ", dir_path, ": ", Errno(err)));
  }
  std::string text;
  {
    const std::string fdinfo = absl::StrCat(t.proc_root, "/self/fdinfo/", pidfd.get());
    UniqueFd f(::open(fdinfo.c_str(), O_RDONLY | O_CLOEXEC));
    int err = f.get() < 0 ? errno : ReadUpTo(f.get(), kMaxFdinfoBytes, &text);
    int64_t seen = 0;
    if (err != 0 || !ParsePidfdFdinfoPid(text, &seen)) {
      return absl::UnavailableError(absl::StrCat("cannot read the pidfd's pid from ", fdinfo,
                                                 err != 0 ? absl::StrCat(": ", Errno(err)) : ""));
    }
    if (seen == -1) return absl::NotFoundError(absl::StrCat("its process ", t.pid, " exited"));
    if (seen != static_cast<int64_t>(t.pid)) {
      return absl::FailedPreconditionError(
          absl::StrCat(t.proc_root, " shows process ", t.pid, " as pid ", seen,
                       ": the sidecar's /proc is of another PID namespace"));
    }
  }
  return absl::OkStatus();
}

// 4. Last, right before the signal (the status file does not take the process's mmap lock, so
//    this cannot block on a process stuck in the kernel): alive, the segment owner's (real,
//    effective and saved uid), and it catches the signal, so that the signal kills nothing.
absl::Status ReadStatus(const OwnerSignalTarget& t, const UniqueFd& dir, ProcStatus* st) {
  std::string text;
  UniqueFd f(::openat(dir.get(), "status", O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  const int err = f.get() < 0 ? errno : ReadUpTo(f.get(), kMaxStatusBytes, &text);
  if (err == ESRCH) return absl::NotFoundError(absl::StrCat("its process ", t.pid, " exited"));
  if (err != 0 || !ParseProcStatus(text, st)) {
    return absl::UnavailableError(absl::StrCat("cannot read ", t.proc_root, "/", t.pid, "/status",
                                               err != 0 ? absl::StrCat(": ", Errno(err)) : ""));
  }
  return absl::OkStatus();
}

absl::Status CheckStatus(const OwnerSignalTarget& t, const UniqueFd& dir) {
  ProcStatus st;
  if (absl::Status s = ReadStatus(t, dir, &st); !s.ok()) return s;
  if (st.state == 'Z' || st.state == 'X' || st.state == 'x') {
    return absl::FailedPreconditionError(
        absl::StrCat("its process ", t.pid, " has exited (state ", std::string(1, st.state), ")"));
  }
  if (st.real_uid != t.segment_uid || st.effective_uid != t.segment_uid ||
      st.saved_uid != t.segment_uid) {
    return absl::PermissionDeniedError(
        absl::StrCat("its process ", t.pid, " runs as uid ", st.real_uid, "/", st.effective_uid,
                     "/", st.saved_uid, " (real/effective/saved), not as the segment's owner (uid ",
                     t.segment_uid, ")"));
  }
  const char* name = t.signal_number == SIGUSR1 ? "SIGUSR1" : "SIGUSR2";
  if (!st.has_sigcgt) {
    return absl::UnavailableError(absl::StrCat(t.proc_root, "/", t.pid,
                                               "/status has no SigCgt line: cannot tell whether "
                                               "its process catches ",
                                               name));
  }
  if (!CatchesSignal(st, t.signal_number)) {
    return absl::FailedPreconditionError(absl::StrCat("its process ", t.pid, " does not catch ",
                                                      name, " (no dump handler installed)"));
  }
  return absl::OkStatus();
}

// 5. The signal, to the process the pidfd holds (ESRCH if it exited meanwhile).
absl::Status SendSignal(const OwnerSignalTarget& t, const UniqueFd& pidfd) {
#ifdef SYS_pidfd_send_signal
  const long sent = ::syscall(SYS_pidfd_send_signal, pidfd.get(), t.signal_number, nullptr, 0);
#else
  errno = ENOSYS;
  const long sent = -1;
#endif
  if (sent != 0) {
    const int err = errno;
    if (err == ESRCH) {
      return absl::NotFoundError(absl::StrCat("its process ", t.pid, " exited before the signal"));
    }
    if (err == ENOSYS) {
      return absl::UnimplementedError("this kernel has no pidfd_send_signal (Linux 5.1 or later)");
    }
    return absl::UnavailableError(absl::StrCat("pidfd_send_signal(", t.pid, "): ", Errno(err)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SignalSegmentUser(const OwnerSignalTarget& t) {
  if (absl::Status s = CheckSlotClaims(t); !s.ok()) return s;
  UniqueFd pidfd;
  if (absl::Status s = OpenPidfd(t, &pidfd); !s.ok()) return s;
  UniqueFd dir;
  if (absl::Status s = OpenProcDir(t, pidfd, &dir); !s.ok()) return s;
  if (absl::Status s = CheckStatus(t, dir); !s.ok()) return s;  // last: nearest the signal
  return SendSignal(t, pidfd);
}

}  // namespace stagefrontier
