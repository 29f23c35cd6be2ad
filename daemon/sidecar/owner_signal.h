// Sends a trainer its "dump your stacks" signal (hang evidence), for a sidecar that may run as
// root: the pid, PID namespace and signal come from the trainer's slot, which the trainer's
// user writes, so they are hostile. A signal goes only to a process that checks out:
//
//   - the signal is SIGUSR1 or SIGUSR2 (0: the trainer has no dump handler), the pid lies in
//     [2, 2^22] and is not this process's own, and the slot's PID namespace is this process's;
//   - a pidfd is opened first, so that every check and the signal refer to one process (a pid
//     reused meanwhile is refused; a kernel without pidfd_open is refused, never kill()ed);
//   - /proc/<pid> is that process (the pidfd's fdinfo names the same pid through the same
//     /proc);
//   - last, right before the signal, its /proc/<pid>/status: it is not a zombie, its real,
//     effective and saved uids are the segment file's owner, and it catches the signal (SigCgt:
//     a handler is installed; SIGUSR2's default action would kill it, an ignored one is lost).
//
//   - a segment writable by its group or others (so its writer may be another user) is refused
//     when it is owned by root or by this process's user: a group member must not aim the
//     signal at root's daemons (a root sidecar's --create-job segment is root's, 0660).
//
// So the worst a hostile slot can do is have a handled SIGUSR1/2 sent to another process of the
// segment owner's own, which that user could do anyway; nothing is killed by it. No check reads
// /proc/<pid>/maps (or anything else that takes the target's mmap lock): a trainer stuck in the
// kernel holding it, a GPU driver hang say, cannot block the caller.
//
//   OwnerSignalTarget t;
//   t.pid = slot.owner_pid.load();  t.pid_ns = slot.owner_pid_ns.load();
//   t.signal_number = static_cast<int>(slot.dump_signal.load());
//   t.segment_uid = st.st_uid;
//   absl::Status s = SignalSegmentUser(t);  // OK: signalled; else the message says why not
#ifndef STAGEFRONTIER_DAEMON_SIDECAR_OWNER_SIGNAL_H_
#define STAGEFRONTIER_DAEMON_SIDECAR_OWNER_SIGNAL_H_

#include <sys/types.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace stagefrontier {

// Linux's largest pid_max: a larger pid is no process (shm/slot_ownership.cc ProcessExists).
inline constexpr uint32_t kMaxSignalledPid = 1U << 22;

struct OwnerSignalTarget {
  uint32_t pid = 0;       // slot owner_pid (untrusted)
  uint64_t pid_ns = 0;    // slot owner_pid_ns (untrusted)
  int signal_number = 0;  // slot dump_signal (untrusted): only SIGUSR1 or SIGUSR2 are sent
  uid_t segment_uid = 0;  // owner of the segment file (fstat/lstat by the sidecar)
  mode_t segment_mode = 0600;       // its permission bits (the same stat)
  const char* proc_root = "/proc";  // tests: a fake tree (its "self" a link to /proc/self)
};

// Sends t.signal_number to process t.pid through a pidfd if every check above passes. Returns
// OK when the signal was sent; otherwise nothing was sent and the message says why, phrased to
// follow "not signalled: " (e.g. "its process 42 does not catch SIGUSR2 (no dump handler
// installed)"). Codes: InvalidArgument (signal, pid), FailedPrecondition (namespace, zombie,
// signal not caught, /proc of another namespace), PermissionDenied (uid), NotFound (no such
// process), Unimplemented (no pidfd), Unavailable (other system call failures, a status file
// without SigCgt).
[[nodiscard]] absl::Status SignalSegmentUser(const OwnerSignalTarget& t);

// /proc/<pid>/status, parsed: the State letter (0: no State line), the Uid line's real,
// effective and saved uids, and the SigCgt mask (signals with a handler; bit sig-1 for signal
// sig, the first 64 signals).
struct ProcStatus {
  char state = 0;
  bool has_uids = false;
  uid_t real_uid = 0;
  uid_t effective_uid = 0;
  uid_t saved_uid = 0;
  bool has_sigcgt = false;
  uint64_t sig_caught = 0;
};

// Parses the State, Uid and SigCgt lines of a status file's text. False when State or Uid is
// missing or malformed, or a SigCgt line is malformed; a missing SigCgt line leaves has_sigcgt
// false.
bool ParseProcStatus(absl::string_view text, ProcStatus* out);

// Whether `st` says signal `sig` (1 to 64) is caught. False without a SigCgt line.
bool CatchesSignal(const ProcStatus& st, int sig);

// The "Pid:" line of a pidfd's fdinfo text (-1: the process is gone, or not visible in that
// /proc's PID namespace). False when absent or malformed.
bool ParsePidfdFdinfoPid(absl::string_view text, int64_t* pid);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIDECAR_OWNER_SIGNAL_H_
