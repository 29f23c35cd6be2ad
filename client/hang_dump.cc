#include "client/hang_dump.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "shm/monotonic_clock.h"
#include "shm/open_stage.h"

namespace stagefrontier {
namespace {

constexpr char kRequestedLine[] = "stagefrontier: stack dump requested\n";
constexpr size_t kMaxText = size_t{8} << 20;  // 8 MiB of pipe text per dump
// The dump is complete after this long silent: long enough for a faulthandler dump paused by
// a loaded CPU not to be split in two (the rest would go to stderr as unrequested).
constexpr int kQuietMs = 300;
constexpr int64_t kMaxCollectNs = 10'000'000'000;  // a stream that never stops is cut here

// Our handler's pipe and process (a forked child's copy of the handler writes nothing: the
// pipe is its parent's).
std::atomic<int> g_handler_fd{-1};
std::atomic<pid_t> g_handler_pid{0};

void OnDumpSignal(int) {
  const int saved = errno;
  const int fd = g_handler_fd.load(std::memory_order_relaxed);
  if (fd >= 0 && getpid() == g_handler_pid.load(std::memory_order_relaxed)) {
    const ssize_t n = write(fd, kRequestedLine, sizeof(kRequestedLine) - 1);
    (void)n;
  }
  errno = saved;
}

const char* SignalName(int sig) {
  switch (sig) {
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    default:
      return "signal";
  }
}

bool HasHandler(const struct sigaction& a) {
  if ((a.sa_flags & SA_SIGINFO) != 0) return a.sa_sigaction != nullptr;
  return a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN;
}

std::string WallTime() {
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  struct tm tm;
  gmtime_r(&t.tv_sec, &tm);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char ms[8];
  std::snprintf(ms, sizeof ms, ".%03dZ", static_cast<int>(t.tv_nsec / 1'000'000));
  return std::string(buf, n) + ms;
}

// False (errno set) if not every byte could be written.
bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}
bool WriteAll(int fd, const std::string& s) { return WriteAll(fd, s.data(), s.size()); }

// mkdir -p; the folders it creates get mode 0777 less the umask (as os.makedirs).
bool MakeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    const std::string prefix = path.substr(0, i);
    if (mkdir(prefix.c_str(), 0777) != 0 && errno != EEXIST) return false;
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::string DefaultCaptureDirectory(const std::string& shm_dir) {
  const char* env = ::getenv("STAGEFRONTIER_CAPTURE_DIR");
  if (env != nullptr && *env != '\0') return env;
  return (shm_dir.empty() ? std::string("/dev/shm") : shm_dir) + "/stagefrontier-captures";
}

absl::StatusOr<std::unique_ptr<HangDumper>> HangDumper::Create(HangDumpOptions options,
                                                               Context context) {
  if (options.signal_number != SIGUSR1 && options.signal_number != SIGUSR2) {
    return absl::InvalidArgumentError(absl::StrCat("hang dumps: signal ", options.signal_number,
                                                   " refused: only SIGUSR1 (", SIGUSR1,
                                                   ") or SIGUSR2 (", SIGUSR2, ")"));
  }
  if (context.slot == nullptr) return absl::FailedPreconditionError("hang dumps: no slot");
  try {
    std::unique_ptr<HangDumper> d(new HangDumper(std::move(options), std::move(context)));
    absl::Status s = d->Start();
    if (!s.ok()) return s;  // the destructor undoes what Start did
    return d;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("hang dumps: ", e.what()));
  }
}

HangDumper::HangDumper(HangDumpOptions options, Context context)
    : options_(std::move(options)), context_(std::move(context)), owner_pid_(getpid()) {}

HangDumper::~HangDumper() { Close(); }

absl::Status HangDumper::Start() {
  const int sig = options_.signal_number;
  // In both modes: our handler must not replace one, and a caller's handler must not be
  // registered over one either (faulthandler.register would replace it silently).
  struct sigaction current;
  sigaction(sig, nullptr, &current);
  if (HasHandler(current)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "hang dumps: ", SignalName(sig),
        " already has a handler (the trainer's or a library's, perhaps installed from C): pick "
        "the other signal, or remove it",
        options_.install_handler
            ? ", or use install_handler=false and have that handler write into signal_fd()"
            : " (enable hang dumps before installing your own handler)"));
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("hang dumps: pipe: ", std::strerror(errno)));
  }
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  // Both ends non-blocking: a handler writing into a full pipe (our thread stuck in a write
  // or a callback) must fail, not block the training thread inside the handler forever.
  for (int fd : {read_fd_, write_fd_}) {
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
      return absl::InternalError(absl::StrCat("hang dumps: fcntl: ", std::strerror(errno)));
    }
  }
  (void)fcntl(write_fd_, F_SETPIPE_SZ, 1 << 20);  // room for a big dump; the default is fine
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) {
    return absl::InternalError(absl::StrCat("hang dumps: eventfd: ", std::strerror(errno)));
  }
  // The thread starts with the signal blocked (it must keep draining the pipe).
  sigset_t block;
  sigset_t old_mask;
  sigemptyset(&block);
  sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, &old_mask);
  try {
    thread_ = std::make_unique<std::thread>([this] { Run(); });
  } catch (const std::exception& e) {
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    return absl::InternalError(absl::StrCat("hang dumps: thread: ", e.what()));
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (options_.install_handler) {
    g_handler_pid.store(owner_pid_, std::memory_order_relaxed);
    g_handler_fd.store(write_fd_, std::memory_order_relaxed);
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = &OnDumpSignal;
    sa.sa_flags = SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, &previous_) != 0) {
      g_handler_fd.store(-1, std::memory_order_relaxed);
      return absl::InternalError(absl::StrCat("hang dumps: sigaction: ", std::strerror(errno)));
    }
    handler_installed_ = true;
    if (HasHandler(previous_)) {  // installed between our check and ours: give it back
      return absl::FailedPreconditionError(
          absl::StrCat("hang dumps: ", SignalName(sig), " already has a handler"));
    }
  }
  // Only now may the sidecar signal this process (the caller's own handler: at Publish).
  return options_.install_handler ? Publish() : absl::OkStatus();
}

absl::Status HangDumper::Publish() {
  if (closed_) return absl::FailedPreconditionError("hang dumps are closed");
  if (getpid() != owner_pid_) {
    return absl::FailedPreconditionError("hang dumps: a forked child (the slot is the parent's)");
  }
  context_.slot->dump_signal.store(static_cast<uint32_t>(options_.signal_number),
                                   std::memory_order_release);
  return absl::OkStatus();
}

absl::Status HangDumper::Unpublish() {
  if (closed_) return absl::OkStatus();  // Close cleared dump_signal
  if (getpid() != owner_pid_) {
    return absl::FailedPreconditionError("hang dumps: a forked child (the slot is the parent's)");
  }
  context_.slot->dump_signal.store(0, std::memory_order_release);
  return absl::OkStatus();
}

void HangDumper::Close() noexcept {
  if (closed_) return;
  closed_ = true;
  const bool forked_child = getpid() != owner_pid_;
  // First, so that the sidecar stops signalling (a forked child's slot is its parent's).
  if (!forked_child) context_.slot->dump_signal.store(0, std::memory_order_release);
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  done_cv_.NotifyAll();
  if (thread_ != nullptr) {
    if (forked_child) {
      (void)thread_.release();  // the parent's thread, absent here: never joined
    } else {
      const uint64_t one = 1;
      const ssize_t n = write(stop_fd_, &one, sizeof one);
      (void)n;
      try {
        thread_->join();
      } catch (...) {
        (void)thread_.release();
      }
      thread_.reset();
    }
  }
  if (handler_installed_) {
    sigaction(options_.signal_number, &previous_, nullptr);
    g_handler_fd.store(-1, std::memory_order_relaxed);
    handler_installed_ = false;
  }
  for (int* fd : {&read_fd_, &write_fd_, &stop_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

HangDumpWait HangDumper::WaitForDump(std::chrono::milliseconds timeout, uint64_t after) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock l(&mu_);
  while (completed_ <= after && !stopping_ && done_cv_.WaitUntil(&mu_, deadline)) {
  }
  HangDumpWait w;
  w.count = completed_;
  if (completed_ > after) w.capture_id = completed_id_;
  return w;
}

HangDumpStats HangDumper::stats() const noexcept {
  HangDumpStats s;
  s.dumps_written = dumps_written_.load(std::memory_order_relaxed);
  s.dumps_unrequested = dumps_unrequested_.load(std::memory_order_relaxed);
  s.dump_errors = dump_errors_.load(std::memory_order_relaxed);
  return s;
}

void HangDumper::Run() noexcept {
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, options_.signal_number);
  pthread_sigmask(SIG_BLOCK, &block, nullptr);
  for (;;) {
    pollfd p[2] = {{read_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      char what[160];  // no allocation here: Run may not throw
      std::snprintf(what, sizeof(what), "poll: %s", std::strerror(errno));
      Fail(what);
      return;
    }
    if (p[1].revents != 0) return;
    if (p[0].revents == 0) continue;
    try {
      std::string text;
      uint64_t truncated = 0;
      if (!Collect(&text, &truncated)) return;
      Handle(text, truncated);
    } catch (const std::exception& e) {  // bad_alloc, say
      Fail(e.what());
    } catch (...) {
      Fail("unknown exception");
    }
  }
}

bool HangDumper::Collect(std::string* text, uint64_t* truncated) {
  const int64_t start = shm::MonotonicNowNs();
  bool eof = false;
  char buf[65536];
  for (;;) {
    const ssize_t r = read(read_fd_, buf, sizeof buf);
    if (r > 0) {
      const size_t room = kMaxText - std::min(kMaxText, text->size());
      const size_t keep = std::min(room, static_cast<size_t>(r));
      text->append(buf, keep);
      *truncated += static_cast<size_t>(r) - keep;
      continue;
    }
    if (r == 0) {
      eof = true;  // every write end is closed: nothing more will come
      break;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      Fail(absl::StrCat("read: ", std::strerror(errno)));
      break;
    }
    if (shm::MonotonicNowNs() - start > kMaxCollectNs) break;
    pollfd p[2] = {{read_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    const int n = poll(p, 2, kQuietMs);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // quiet for kQuietMs: the dump is complete
    if (p[1].revents != 0) return false;
  }
  return !(eof && text->empty());
}

void HangDumper::Handle(const std::string& text, uint64_t truncated) {
  shm::v1::SlotHeader& slot = *context_.slot;
  const uint64_t id = slot.dump_request_id.load(std::memory_order_acquire);
  const uint64_t answered = slot.dump_answered_id.load(std::memory_order_acquire);
  if (id == 0 || id == answered) {
    dumps_unrequested_.fetch_add(1, std::memory_order_relaxed);
    std::fprintf(stderr, "stagefrontier: stack dump (no request from the coordinator):\n");
    std::fwrite(text.data(), 1, text.size(), stderr);
    if (!text.empty() && text.back() != '\n') std::fputc('\n', stderr);
    std::fflush(stderr);
    return;
  }
  if (!WriteDump(RequestFor(id), text, truncated)) return;
  slot.dump_answered_id.store(id, std::memory_order_release);
  dumps_written_.fetch_add(1, std::memory_order_relaxed);
  {
    MutexLock l(&mu_);
    ++completed_;
    completed_id_ = id;
  }
  done_cv_.NotifyAll();
}

HangDumpRequest HangDumper::RequestFor(uint64_t id) const {
  HangDumpRequest r;
  r.capture_id = id;
  r.rank = context_.rank;
  r.job = context_.job;
  shm::OpenStage o;
  if (shm::ReadOpenStage(*context_.slot, &o) && o.known()) {
    if (o.between_steps()) {
      r.open_step = o.step;
      r.open_stage = "between steps";
    } else if (o.stage() < context_.stage_names.size()) {
      r.open_step = o.step;
      r.open_stage = context_.stage_names[o.stage()];
    }
  }
  return r;
}

bool HangDumper::WriteDump(const HangDumpRequest& request, const std::string& text,
                           uint64_t truncated) noexcept {
  try {
    const std::string dir = absl::StrCat(context_.directory, "/", context_.job);
    const std::string name =
        absl::StrCat("stacks_rank", context_.rank, "_capture", request.capture_id, ".txt");
    const std::string path = absl::StrCat(dir, "/", name);
    const std::string part = absl::StrCat(name, ".", owner_pid_, ".part");
    if (!MakeDirs(dir)) {
      Fail(absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
      return false;
    }
    // The job's folder is opened without following a link and must be this user's: a link
    // another user planted there would have the dump written (and renamed over a file) in a
    // folder of theirs choosing. Everything below goes through its descriptor.
    const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0) {
      Fail(absl::StrCat("cannot open ", dir, ": ", std::strerror(errno)));
      return false;
    }
    struct DirCloser {
      int fd;
      ~DirCloser() { close(fd); }
    } dir_closer{dir_fd};
    struct stat dir_st {};
    if (fstat(dir_fd, &dir_st) != 0 || dir_st.st_uid != geteuid()) {
      Fail(absl::StrCat(dir, " is not this user's folder (owner uid ", dir_st.st_uid, ")"));
      return false;
    }
    constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    // 0666 less the umask, as Python's open(): a sidecar of the trainer's group may read it.
    int fd = openat(dir_fd, part.c_str(), kFlags, 0666);
    if (fd < 0 && errno == EEXIST && unlinkat(dir_fd, part.c_str(), 0) == 0) {  // an older try
      fd = openat(dir_fd, part.c_str(), kFlags, 0666);
    }
    if (fd < 0) {
      Fail(absl::StrCat("cannot create ", dir, "/", part, ": ", std::strerror(errno)));
      return false;
    }
    std::string header = absl::StrCat(
        "# stagefrontier stack dump\n# job: ", context_.job, "\n# rank: ", context_.rank,
        "\n# pid: ", owner_pid_, "\n# capture id: ", request.capture_id,
        "\n# open stage: ", request.open_stage.empty() ? "unknown" : request.open_stage,
        "\n# open step: ", request.open_step, "\n# wall time: ", WallTime(), "\n");
    if (truncated > 0) {
      absl::StrAppend(&header, "# truncated: ", truncated, " more bytes past ", kMaxText >> 20,
                      " MiB were dropped\n");
    }
    bool ok = WriteAll(fd, header) && WriteAll(fd, text);
    if (ok && !text.empty() && text.back() != '\n') ok = WriteAll(fd, "\n", 1);
    if (ok && options_.callback) {
      ok = WriteAll(fd, std::string("# from the trainer's callback:\n"));
      if (ok) {
        std::string thrown;
        try {
          options_.callback(request, fd);
        } catch (const std::exception& e) {
          thrown = e.what();
        } catch (...) {
          thrown = "unknown exception";
        }
        if (!thrown.empty()) ok = WriteAll(fd, absl::StrCat("\n# callback threw: ", thrown, "\n"));
      }
    }
    int error = ok ? 0 : errno;
    if (close(fd) != 0 && ok) {
      error = errno;
      ok = false;
    }
    if (ok && renameat(dir_fd, part.c_str(), dir_fd, name.c_str()) == 0) return true;
    if (ok) error = errno;
    Fail(absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
    unlinkat(dir_fd, part.c_str(), 0);
    return false;
  } catch (const std::exception& e) {
    Fail(e.what());
    return false;
  }
}

void HangDumper::Fail(absl::string_view what) noexcept {
  dump_errors_.fetch_add(1, std::memory_order_relaxed);
  if (!error_said_.exchange(true)) {
    std::fprintf(stderr,
                 "stagefrontier: rank %d: hang dump failed: %.*s (the trainer is not affected; "
                 "further failures are counted, not said)\n",
                 context_.rank, static_cast<int>(what.size()), what.data());
  }
}

}  // namespace stagefrontier
