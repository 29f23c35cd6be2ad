#include "daemon/captures/capture_analysis_child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <new>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/captures/capture_analysis.h"
#include "daemon/captures/operator_report_render.h"
#include "daemon/common/fd_io.h"

extern char** environ;

namespace stagefrontier {
namespace {

// argv[1] of a child: nobody types it, so no flag of a real command line can collide.
constexpr const char* kChildMarker = "--stagefrontier-capture-analysis-child";

std::string SignalText(int sig) {
  const char* name = ::strsignal(sig);
  return absl::StrCat("signal ", sig, name != nullptr ? absl::StrCat(": ", name) : "");
}

int Answer(const nlohmann::ordered_json& j, int rc) {
  // A parent gone away reads nothing either way: nothing to do about a failed write here.
  (void)WriteFully(STDOUT_FILENO, j.dump());
  return rc;
}

int ChildMain(int argc, char** argv) {
  // argv: exe marker max_memory max_cpu schema stage suspect reference...
  uint64_t max_memory = 0, max_cpu = 0;
  if (argc < 8 || !absl::SimpleAtoi(argv[2], &max_memory) || !absl::SimpleAtoi(argv[3], &max_cpu)) {
    return Answer({{"ok", false}, {"code", 3}, {"error", "bad analysis child arguments"}}, 2);
  }
  // Limits first, before any byte of a trace is read.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // (The sanitizers reserve terabytes of address space; under them only the CPU limit holds.)
  const rlimit as{max_memory, max_memory};
  ::setrlimit(RLIMIT_AS, &as);
#endif
  const rlimit cpu{max_cpu, max_cpu + 5};
  ::setrlimit(RLIMIT_CPU, &cpu);
  const rlimit core{0, 0};
  ::setrlimit(RLIMIT_CORE, &core);
  try {
    absl::StatusOr<StageSchema> schema = StageSchema::Parse(argv[4]);
    if (!schema.ok()) {
      return Answer({{"ok", false}, {"code", 3}, {"error", schema.status().message()}}, 1);
    }
    std::vector<std::string> references(argv + 7, argv + argc);
    absl::StatusOr<OperatorReport> r = AnalyzeCaptureFiles(argv[6], references, *schema, argv[5]);
    if (!r.ok()) {
      return Answer({{"ok", false},
                     {"code", static_cast<int>(r.status().code())},
                     {"error", r.status().message()}},
                    1);
    }
    return Answer(
        {{"ok", true}, {"report", OperatorReportJson(*r)}, {"text", RenderOperatorReportText(*r)}},
        0);
  } catch (const std::bad_alloc&) {
    return Answer({{"ok", false},
                   {"code", static_cast<int>(absl::StatusCode::kResourceExhausted)},
                   {"error", absl::StrCat("the analysis needed more than its ", max_memory >> 20,
                                          " MiB of memory")}},
                  1);
  }
}

// Reads the child's answer until it closes its end, the deadline passes or the answer is too
// long. Returns false (and says why) on the last two.
bool ReadAnswer(int fd, std::chrono::steady_clock::time_point deadline, uint64_t max_bytes,
                std::string* out, std::string* why) {
  char buf[65536];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      *why = "timeout";
      return false;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) {
      *why = absl::StrCat("poll: ", std::strerror(errno));
      return false;
    }
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return true;  // the child closed its end (exited)
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > max_bytes) {
      *why = absl::StrCat("an answer of more than ", max_bytes, " bytes");
      return false;
    }
  }
}

absl::StatusOr<CaptureAnalysis> RunChild(const CaptureAnalysisChildOptions& o,
                                         const std::string& suspect,
                                         const std::vector<std::string>& references,
                                         const StageSchema& schema, const std::string& stage) {
  std::vector<std::string> args = {o.executable,
                                   kChildMarker,
                                   absl::StrCat(o.max_memory_bytes),
                                   absl::StrCat(o.max_cpu_seconds),
                                   schema.ToString(),
                                   stage,
                                   suspect};
  args.insert(args.end(), references.begin(), references.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  // The caller's blocked signals (a daemon waits for SIGTERM with it blocked) are not the
  // child's: it starts with none blocked and every signal at its default.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int spawned =
      ::posix_spawn(&pid, o.executable.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (spawned != 0) {
    ::close(pipe_fds[0]);
    return absl::UnavailableError(
        absl::StrCat("cannot start the analysis (", o.executable, "): ", std::strerror(spawned)));
  }
  std::string answer, why;
  const bool read_all = ReadAnswer(pipe_fds[0], std::chrono::steady_clock::now() + o.timeout,
                                   o.max_answer_bytes, &answer, &why);
  ::close(pipe_fds[0]);
  if (!read_all) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!read_all) {
    return absl::ResourceExhaustedError(
        why == "timeout" ? absl::StrCat("the analysis ran past its ", o.timeout.count() / 1000,
                                        " s and was stopped")
                         : absl::StrCat("the analysis was stopped: ", why));
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (sig == SIGXCPU || sig == SIGKILL) {
      return absl::ResourceExhaustedError(absl::StrCat("the analysis ran past its limit of ",
                                                       o.max_cpu_seconds, " CPU seconds (",
                                                       SignalText(sig), ")"));
    }
    return absl::InternalError(absl::StrCat("the analysis crashed (", SignalText(sig), ")"));
  }
  const nlohmann::json j = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) {
    return absl::InternalError(absl::StrCat("the analysis ended (exit code ",
                                            WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                                            ") without an answer"));
  }
  if (!j["ok"].get<bool>()) {
    const int code = j.value("code", static_cast<int>(absl::StatusCode::kInternal));
    const bool known = code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated);
    return absl::Status(known ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kInternal,
                        j.value("error", std::string("the analysis failed")));
  }
  CaptureAnalysis a;
  a.report_json = j.contains("report") ? j["report"].dump() : "{}";
  a.text = j.value("text", std::string());
  return a;
}

}  // namespace

absl::StatusOr<CaptureAnalysis> AnalyseCaptureInProcess(
    const std::string& suspect_path, const std::vector<std::string>& reference_paths,
    const StageSchema& schema, const std::string& stage) {
  absl::StatusOr<OperatorReport> r =
      AnalyzeCaptureFiles(suspect_path, reference_paths, schema, stage);
  if (!r.ok()) return r.status();
  return CaptureAnalysis{OperatorReportJson(*r).dump(), RenderOperatorReportText(*r)};
}

CaptureAnalyser ChildCaptureAnalyser(CaptureAnalysisChildOptions options) {
  return [options](const std::string& suspect, const std::vector<std::string>& references,
                   const StageSchema& schema, const std::string& stage) {
    return RunChild(options, suspect, references, schema, stage);
  };
}

std::optional<int> RunCaptureAnalysisChildIfAsked(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != kChildMarker) return std::nullopt;
  return ChildMain(argc, argv);
}

}  // namespace stagefrontier
