// Runs an operator's command when a node turns chronic (node_class.h): opt-in, dry-run by
// default, rate-limited. The command runs under /bin/sh -c with the node and its evidence in
// the environment, never spliced into the command text (node names come from sidecars):
//   SF_NODE, SF_NODE_CLASS, SF_WASTED_GPU_SECONDS, SF_STAGES, SF_JOBS, SF_REASON
// e.g. --drain-command 'scontrol update nodename="$SF_NODE" state=drain reason="$SF_REASON"'
// (deploy/slurm/drain-node.sh and deploy/k8s/taint-node.sh are tested examples).
//
//   DrainHook hook(options, log);
//   hook.Start();
//   ledger->SetClassChange([&](const NodeSummary& n, NodeClass) { hook.OnClassChange(n); });
//   ...
//   hook.Stop();
//
// OnClassChange never blocks: it queues the node for a worker thread. The worker refuses
// node names outside [A-Za-z0-9._-] (logged, counted), applies the rate limit (at most
// `max_per_hour` nodes in any hour; dry runs count, so a dry run shows what would happen),
// then in dry-run mode logs what it would run; otherwise runs the command with a time limit
// (the process group is killed past it) and retries a failure with doubling delays.
#ifndef STAGEFRONTIER_DAEMON_NODES_DRAIN_HOOK_H_
#define STAGEFRONTIER_DAEMON_NODES_DRAIN_HOOK_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "daemon/nodes/node_ledger.h"
#include "daemon/nodes/node_name.h"

namespace stagefrontier {

struct DrainHookOptions {
  std::string command;   // empty: no hook
  bool execute = false;  // false: dry run (log what would run)
  int max_per_hour = 1;
  std::chrono::milliseconds timeout{30'000};
  int attempts = 3;
  std::chrono::milliseconds retry_delay{1000};  // doubled after each failed attempt
};

// What happened to each chronic node handed to the hook.
struct DrainHookCounters {
  std::atomic<uint64_t> dry_runs{0};
  std::atomic<uint64_t> succeeded{0};
  std::atomic<uint64_t> failed{0};    // every attempt failed or timed out
  std::atomic<uint64_t> timeouts{0};  // attempts killed past the time limit
  std::atomic<uint64_t> rate_limited{0};
  std::atomic<uint64_t> refused_names{0};
  std::atomic<uint64_t> identity_conflicts{0};  // chronic, but two sidecars claimed the node
};

class DrainHook {
 public:
  using Log = std::function<void(const std::string&)>;
  DrainHook(DrainHookOptions options, Log log);
  ~DrainHook();  // Stop()s

  // Why a node must not be drained now (its identity is in conflict), or empty. Set before
  // Start.
  using Veto = std::function<std::string(const std::string& node)>;
  void SetVeto(Veto veto) { veto_ = std::move(veto); }
  void Start();
  // Queues `node` if it is chronic and a command is set. Never blocks.
  void OnClassChange(const NodeSummary& node);
  // Finishes the queued nodes' current attempt at most, then returns.
  void Stop();
  // Blocks until the queue is empty and the worker idle (for tests and shutdown).
  void Drain();
  const DrainHookCounters& counters() const { return counters_; }

 private:
  void Run();
  void Handle(const NodeSummary& node);
  // One attempt: 0 on success, the exit status, or -1 for a timeout or a spawn failure.
  int RunOnce(const std::vector<std::string>& env, std::string* why);
  bool HasWork() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); }
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (queue_.empty() && !busy_) || stop_ || !worker_.joinable();
  }

  const DrainHookOptions options_;
  Log log_;
  Veto veto_;
  DrainHookCounters counters_;
  Mutex mu_;
  CondVar changed_;  // queue_, busy_ or stop_ changed
  std::deque<NodeSummary> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Hook decisions, last hour.
  std::deque<std::chrono::steady_clock::time_point> recent_ ABSL_GUARDED_BY(mu_);
  std::thread worker_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_NODES_DRAIN_HOOK_H_
