// Hang dumps: when a job hangs, the coordinator asks the stuck rank for every thread's stack.
// The sidecar stores the capture id in the rank's slot (`dump_request_id`) and then sends the
// owner the signal the stub published in `dump_signal` (SIGUSR1 or SIGUSR2; 0: never signal).
// A HangDumper (owned by the Client, see Client::EnableHangDumps) answers it:
//
//   - a signal handler (ours, or the trainer's own, such as Python's faulthandler writing
//     every thread's traceback) writes text into a pipe; both of its ends are non-blocking, so
//     that a handler never blocks the training thread when our thread stops reading (a full
//     pipe loses the text: our handler and faulthandler ignore the failed write);
//   - a thread of ours drains the pipe (until 300 ms pass without new bytes), reads the
//     request id, and writes <directory>/<job>/stacks_rank<R>_capture<ID>.txt: "# " header
//     lines (job, rank, pid, capture id, open stage and step, wall time), the pipe's text,
//     then what the trainer's callback writes into the same file; it is written as
//     <name>.<pid>.part and renamed, so the sidecar never reads half a file;
//   - then it stores `dump_answered_id` = ID, counts the dump and wakes WaitForDump callers.
//
// Folders are created with mode 0777 and files with 0666, less the umask (as Python's
// os.makedirs and open do), so a sidecar in the trainer's group reads them under umask 007.
//
// A signal without a request (`kill -USR2` by hand) prints the text on stderr instead. Nothing
// here ever throws into the trainer or crashes it: write failures are said once on stderr and
// counted. The thread blocks the dump signal, so that it never runs the handler itself (a
// faulthandler dump larger than the pipe would otherwise block it forever).
//
//   HangDumpOptions o;
//   o.callback = [](const HangDumpRequest& r, int fd) {
//     std::string s = absl::StrCat("step ", r.open_step, ": ", MyRuntimeState(), "\n");
//     (void)!write(fd, s.data(), s.size());
//   };
//   absl::Status s = client->EnableHangDumps(std::move(o));  // SIGUSR2, our handler
//   if (!s.ok()) { /* another handler owns SIGUSR2, say: s.message() says which */ }
//
// Python (stagefrontier.Client.enable_hang_dumps(install_handler=False)) installs its own
// handler instead: faulthandler.register(signal.SIGUSR2, file=fd, all_threads=True), fd being
// signal_fd(), then Publish() (publish_hang_dumps()): until then the sidecar never signals, so
// the signal's default action (the process ends) can never meet a request. Before it removes
// its handler (faulthandler.unregister restores the default action) it calls Unpublish()
// (unpublish_hang_dumps()) for the same reason.
//
// THE CALLBACK MUST NOT BLOCK, nor take a lock the training thread may hold: it runs while the
// trainer is hung, quite possibly inside that lock. It runs on the dumper's thread, which
// Close() (and so ~Client) joins without a time limit: a callback that never returns makes
// Close hang, and meanwhile no further dump is taken. Write what is at hand (counters, state
// read with atomics or try-locks) and return.
#ifndef STAGEFRONTIER_CLIENT_HANG_DUMP_H_
#define STAGEFRONTIER_CLIENT_HANG_DUMP_H_

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/mutex.h"
#include "shm/segment_layout_v1.h"

namespace stagefrontier {

// What the coordinator asked, as the callback sees it.
struct HangDumpRequest {
  uint64_t capture_id = 0;
  int32_t rank = 0;
  std::string job;
  int64_t open_step = -1;  // the step of the rank's open stage; -1: unknown
  std::string open_stage;  // its name, "between steps", or "" (unknown)
};

struct HangDumpOptions {
  int signal_number = SIGUSR2;  // SIGUSR1 or SIGUSR2
  // Install our handler (writes one line into the pipe). False: the caller installs its own,
  // writing into signal_fd() (Python's faulthandler), then calls Publish().
  bool install_handler = true;
  // Called on the dumper's thread for each requested dump, after the pipe's text; writes what
  // it wants into `fd` (the dump file; not to be closed). Exceptions are caught and noted in
  // the file. It must not block or take locks the training thread may hold (it runs while the
  // trainer is hung; Close() waits for it without a limit): see the top of this file.
  std::function<void(const HangDumpRequest&, int fd)> callback;
  // Empty: STAGEFRONTIER_CAPTURE_DIR, else "<segment directory>/stagefrontier-captures" (as
  // stagefrontier.torch's captures). Files go in a folder named after the job.
  std::string directory;
};

// WaitForDump's answer: the count of dump files completed so far, and the newest one's id.
struct HangDumpWait {
  uint64_t capture_id = 0;  // the newest completed dump's id; 0 on timeout or once closed
  uint64_t count = 0;       // dump files completed since the dumper started
};

struct HangDumpStats {
  uint64_t dumps_written = 0;      // dump files completed and answered
  uint64_t dumps_unrequested = 0;  // signals without a request (text went to stderr)
  uint64_t dump_errors = 0;        // write failures (said once on stderr)
};

class HangDumper {
 public:
  // Who and where: the client's identity and its slot.
  struct Context {
    shm::v1::SlotHeader* slot = nullptr;
    int32_t rank = 0;
    std::string job;
    std::string directory;  // resolved: the folder holding <job>/
    std::vector<std::string> stage_names;
  };

  // Starts the thread, installs the handler if asked and then publishes the signal in the
  // slot (without install_handler, Publish() does once the caller's handler is in place).
  // InvalidArgument: a signal other than SIGUSR1/SIGUSR2. FailedPrecondition (naming the
  // signal): the signal already has a handler other than SIG_DFL/SIG_IGN, in both modes (so
  // without install_handler the caller must call Create before installing its own; a handler
  // installed from C, which Python's signal.getsignal reports as None, is seen too).
  // Internal: pipe or thread creation failed.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<HangDumper>> Create(HangDumpOptions options,
                                                                          Context context);
  // Close().
  ~HangDumper();
  HangDumper(const HangDumper&) = delete;
  HangDumper& operator=(const HangDumper&) = delete;

  // Clears dump_signal (first), stops and joins the thread (waiting for a running callback,
  // without a limit), restores the previous disposition (if we installed a handler) and
  // closes the pipes. Idempotent. In a forked child only the child's own state is undone (the
  // slot and thread are the parent's).
  void Close() noexcept;

  // Publishes the signal in the slot: from now on the sidecar may send it. Only for a dumper
  // created without install_handler, once the caller's handler is installed; FailedPrecondition
  // once closed or in a forked child. May be called again after Unpublish().
  [[nodiscard]] absl::Status Publish();
  // Stores 0 in dump_signal: the sidecar stops signalling. Call it before removing the
  // caller's handler (the default action would end the process). OK once closed (Close
  // cleared it); FailedPrecondition in a forked child (the slot is the parent's).
  [[nodiscard]] absl::Status Unpublish();

  // The pipe's write end, for a handler of the caller's (-1 once closed).
  int signal_fd() const { return write_fd_; }
  int signal_number() const { return options_.signal_number; }
  // Returns as soon as more than `after` dump files have been completed (at once if that is
  // so already): the newest one's capture id and the count. On timeout or once closed (with
  // no more than `after` completed): capture_id 0 and the current count. A caller passes the
  // count it last saw, so that no dump is lost between two calls.
  HangDumpWait WaitForDump(std::chrono::milliseconds timeout, uint64_t after);
  HangDumpStats stats() const noexcept;

 private:
  HangDumper(HangDumpOptions options, Context context);
  absl::Status Start();
  void Run() noexcept;
  // Reads the pipe until 300 ms pass without new bytes; false if asked to stop.
  // Both allocate, and may throw (bad_alloc): Run catches it.
  bool Collect(std::string* text, uint64_t* truncated);
  void Handle(const std::string& text, uint64_t truncated);
  // Writes the dump file; false (said and counted) on a failure.
  bool WriteDump(const HangDumpRequest& request, const std::string& text,
                 uint64_t truncated) noexcept;
  HangDumpRequest RequestFor(uint64_t id) const;
  void Fail(absl::string_view what) noexcept;  // allocates nothing

  HangDumpOptions options_;
  Context context_;
  pid_t owner_pid_ = 0;
  int read_fd_ = -1;
  int write_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd: written to stop the thread
  bool handler_installed_ = false;
  struct sigaction previous_ = {};
  std::unique_ptr<std::thread> thread_;
  bool closed_ = false;
  std::atomic<uint64_t> dumps_written_{0};
  std::atomic<uint64_t> dumps_unrequested_{0};
  std::atomic<uint64_t> dump_errors_{0};
  std::atomic<bool> error_said_{false};
  Mutex mu_;
  CondVar done_cv_;
  uint64_t completed_ ABSL_GUARDED_BY(mu_) = 0;     // dump files completed
  uint64_t completed_id_ ABSL_GUARDED_BY(mu_) = 0;  // the latest one's capture id
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

// The capture directory rule (stagefrontier.torch's default_directory()):
// STAGEFRONTIER_CAPTURE_DIR, else "<shm_dir>/stagefrontier-captures".
std::string DefaultCaptureDirectory(const std::string& shm_dir);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_CLIENT_HANG_DUMP_H_
