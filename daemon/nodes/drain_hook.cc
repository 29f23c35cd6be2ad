#include "daemon/nodes/drain_hook.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/mutex.h"

extern char** environ;

namespace stagefrontier {
namespace {

using Clock = std::chrono::steady_clock;

std::string Reason(const NodeSummary& n) {
  std::vector<std::string> stages;
  for (const NodeStageCost& s : n.stages) stages.push_back(s.stage);
  return absl::StrFormat(
      "StageFrontier: chronic straggler, %.1f GPU-seconds wasted, charged in %d of %d windows "
      "across %d jobs (stages %s)",
      n.gpu_seconds, n.charged_windows, n.windows, n.jobs_charged,
      stages.empty() ? "-" : absl::StrJoin(stages, ","));
}

}  // namespace

DrainHook::DrainHook(DrainHookOptions options, Log log)
    : options_(std::move(options)), log_(std::move(log)) {}

DrainHook::~DrainHook() { Stop(); }

void DrainHook::Start() {
  if (options_.command.empty() || worker_.joinable()) return;
  worker_ = std::thread([this] { Run(); });
}

void DrainHook::OnClassChange(const NodeSummary& node) {
  if (options_.command.empty() || node.cls != NodeClass::kChronic) return;
  {
    MutexLock lock(&mu_);
    queue_.push_back(node);
  }
  changed_.NotifyAll();
}

void DrainHook::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  changed_.NotifyAll();
  if (worker_.joinable()) worker_.join();
}

void DrainHook::Drain() {
  MutexLock lock(&mu_);
  while (!Idle()) changed_.Wait(&mu_);
}

void DrainHook::Run() {
  mu_.Lock();
  while (true) {
    while (!HasWork()) changed_.Wait(&mu_);
    if (stop_) break;
    NodeSummary node = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    mu_.Unlock();
    Handle(node);
    mu_.Lock();
    busy_ = false;
    changed_.NotifyAll();  // Drain waits for an idle worker
  }
  busy_ = false;
  mu_.Unlock();
  changed_.NotifyAll();
}

void DrainHook::Handle(const NodeSummary& node) {
  if (!SafeNodeName(node.node)) {
    ++counters_.refused_names;
    log_(absl::StrCat("drain hook: node name \"", node.node.substr(0, 64),
                      "\" has characters outside [A-Za-z0-9._-]; not handed to the command"));
    return;
  }
  if (const std::string why = veto_ ? veto_(node.node) : ""; !why.empty()) {
    ++counters_.identity_conflicts;
    log_(absl::StrCat("drain hook: node ", node.node,
                      " is chronic but not drained: its identity is in conflict (", why, ")"));
    return;
  }
  const Clock::time_point now = Clock::now();
  {
    MutexLock lock(&mu_);
    while (!recent_.empty() && now - recent_.front() >= std::chrono::hours(1)) recent_.pop_front();
    if (static_cast<int>(recent_.size()) >= options_.max_per_hour) {
      ++counters_.rate_limited;
      log_(absl::StrCat("drain hook: node ", node.node, " is chronic but not drained: ",
                        options_.max_per_hour, " node(s) per hour already (--drain-max-per-hour)"));
      return;
    }
    recent_.push_back(now);
  }
  const std::string reason = Reason(node);
  std::vector<std::string> env = {
      "SF_NODE=" + node.node,
      std::string("SF_NODE_CLASS=") + NodeClassName(node.cls),
      absl::StrFormat("SF_WASTED_GPU_SECONDS=%.3f", node.gpu_seconds),
      "SF_REASON=" + reason,
  };
  std::vector<std::string> stages;
  for (const NodeStageCost& s : node.stages) stages.push_back(s.stage);
  env.push_back("SF_STAGES=" + absl::StrJoin(stages, ","));
  env.push_back("SF_JOBS=" + absl::StrJoin(node.jobs, ","));
  if (!options_.execute) {
    ++counters_.dry_runs;
    log_(absl::StrCat("drain hook (dry run; --drain-execute runs it) for node ", node.node,
                      ": would run: ", options_.command, " with ", absl::StrJoin(env, " ")));
    return;
  }
  std::chrono::milliseconds delay = options_.retry_delay;
  for (int attempt = 1; attempt <= options_.attempts; ++attempt) {
    std::string why;
    const int rc = RunOnce(env, &why);
    if (rc == 0) {
      ++counters_.succeeded;
      log_(absl::StrCat("drain hook for node ", node.node, " succeeded (attempt ", attempt, ")"));
      return;
    }
    log_(absl::StrCat("drain hook for node ", node.node, " attempt ", attempt, " of ",
                      options_.attempts, " failed: ", why));
    if (attempt == options_.attempts) break;
    const auto until = std::chrono::steady_clock::now() + delay;
    MutexLock lock(&mu_);
    while (!stop_ && changed_.WaitUntil(&mu_, until)) {
    }
    if (stop_) break;
    delay *= 2;
  }
  ++counters_.failed;
}

int DrainHook::RunOnce(const std::vector<std::string>& extra, std::string* why) {
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), extra.begin(), extra.end());
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", cmd = options_.command;
  char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group: a timeout kills its children too
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);  // the coordinator blocks SIGTERM; the hook must not
  pid_t pid = -1;
  const int err = posix_spawn(&pid, sh.c_str(), nullptr, &attr, argv, envp.data());
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    *why = absl::StrCat("cannot start /bin/sh: ", strerror(err));
    return -1;
  }
  const Clock::time_point deadline = Clock::now() + options_.timeout;
  int status = 0;
  while (true) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      *why = absl::StrCat("waitpid: ", strerror(errno));
      return -1;
    }
    if (Clock::now() >= deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      ++counters_.timeouts;
      *why = absl::StrCat("timed out after ", options_.timeout.count(), " ms (killed)");
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (WIFEXITED(status)) {
    if (WEXITSTATUS(status) != 0) *why = absl::StrCat("exit status ", WEXITSTATUS(status));
    return WEXITSTATUS(status);
  }
  *why = absl::StrCat("killed by signal ", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return -1;
}

}  // namespace stagefrontier
