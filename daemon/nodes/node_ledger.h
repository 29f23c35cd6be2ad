// The fail-slow ledger: what each node has cost the jobs it served, across windows and jobs,
// in wasted GPU-seconds, and whether it keeps doing so (node_class.h). The coordinator
// records every closed "job" window (see node_window.h for what a window charges) and the
// ledger survives restarts: each window is one record of <data_dir>/nodes.ledger, in the
// journal's framing (docs/journal-format.md, docs/node-ledger.md), replayed at Open.
//
//   auto ledger = NodeLedger::Open(options, &info);
//   (*ledger)->Record(window);              // a closed window (NodeWindowFromVerdict)
//   job_options.observers.push_back(ledger->get());  // or told by the jobs (OnJobWindow)
//   (*ledger)->Flush();                      // durable
//   for (const NodeSummary& n : (*ledger)->Nodes()) ...   // most costly first
//
// Thread-safe. Bounded: at most `max_nodes` nodes and the last `jobs_kept` charged jobs per
// node are kept; nodes past the bound are counted, not tracked.
#ifndef STAGEFRONTIER_DAEMON_NODES_NODE_LEDGER_H_
#define STAGEFRONTIER_DAEMON_NODES_NODE_LEDGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/events/verdict_observer.h"
#include "daemon/journal/record_log.h"
#include "daemon/nodes/node_class.h"
#include "stagefrontier/v1/journal.pb.h"

namespace stagefrontier {

struct NodeLedgerOptions {
  std::string path;  // "<data_dir>/nodes.ledger"
  bool fsync = true;
  NodeClassConfig classes;
  size_t max_nodes = 100'000;
  size_t jobs_kept = 16;
};

struct NodeStageCost {
  std::string stage;
  double gpu_seconds = 0;
  int64_t windows = 0;  // windows that charged this (stage, node) any excess
};

struct NodeSummary {
  std::string node;
  NodeClass cls = NodeClass::kHealthy;
  double ewma = 0;
  double gpu_seconds = 0;             // wasted: excess x ranks that waited, summed
  std::vector<NodeStageCost> stages;  // most costly first
  int64_t windows = 0;                // windows the node served
  int64_t charged_windows = 0;        // windows where it held charge_share (node_class.h)
  int64_t episodes = 0;
  int64_t jobs_seen = 0;
  int64_t jobs_charged = 0;       // distinct jobs with a charge (recurrence across jobs)
  std::vector<std::string> jobs;  // the last charged jobs, oldest first
  int64_t first_seen_ns = 0;      // wall clock of its first and last window
  int64_t last_seen_ns = 0;
  int64_t last_charged_ns = 0;  // 0 if never charged
  std::string host;             // the machine under the name ("" until a sidecar said)
  std::string address;          // its sidecar's address, as the coordinator saw it
  int64_t hangs = 0;            // hung or dead stalls with a rank of this node named stuck/dead
  int64_t hangs_dead = 0;       // of them, those where that rank's process was gone
  int64_t last_hang_ns = 0;     // wall clock; 0 if never
  std::string last_hang;        // "job J rank R stage S step N (hung)"
};

// What /metrics shows of a node (NodeMetrics): the few fields of NodeSummary it needs.
struct NodeGauge {
  std::string node;
  NodeClass cls = NodeClass::kHealthy;
  double gpu_seconds = 0;
  int64_t charged_windows = 0;
  int64_t hangs = 0;
};

struct NodeLedgerCounters {
  uint64_t windows = 0;            // recorded (replayed ones included)
  uint64_t duplicate_windows = 0;  // a job's window at or before its last recorded one
  uint64_t unattributed = 0;       // charges whose rank had no known node
  uint64_t nodes_refused = 0;      // nodes not tracked: max_nodes reached
  uint64_t replay_skipped = 0;     // ledger records that were not windows
  uint64_t hangs = 0;              // stalls charged as hangs (replayed ones included)
};

class NodeLedger : public VerdictObserver {
 public:
  // Called (under no lock of the ledger's) when a node changes class; `before` is its old one.
  using ClassChange = std::function<void(const NodeSummary& node, NodeClass before)>;

  // Opens the ledger at options.path, creating it if absent, and replays it (damage is
  // repaired as for a journal, `info` says what was skipped). InvalidArgument for a bad
  // classification config; RecordLog::Open's and Create's errors otherwise.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<NodeLedger>> Open(
      const NodeLedgerOptions& options, JournalOpenInfo* info);

  // Records one closed window and appends it to the file (durable after Flush). Returns false,
  // changing nothing, for a window of a job at or before that job's last recorded window.
  bool Record(const v1::NodeWindow& window);
  // A job's closed window (a job observer, JobOptions::observers): recorded as
  // NodeWindowFromVerdict says, with the window's wall time.
  void OnJobWindow(const ClosedJobWindow& window) override;
  // A job's stall (a job observer): the first time a stall alarms with reason hung or dead,
  // one hang is charged to each distinct node of its ranks named stuck or dead, and written.
  // Its changes, its end, other reasons and a non-alarm stall charge nothing.
  void OnJobStall(const std::string& job, const v1::Stall& stall, int64_t wall_ns) override;
  // Forgets the job's last nodes and hang (what the nodes were charged stays).
  void OnJobRetired(const std::string& job) override;
  [[nodiscard]] absl::Status Flush();
  // Records the machine under `node` (its sidecar's hostname and address, from its Hello);
  // written only when new or changed. At most max_nodes names are kept.
  void NoteHost(const std::string& node, const std::string& host, const std::string& address,
                int64_t wall_time_ns);

  // Every tracked node, most wasted GPU-seconds first (then most hangs, then by name).
  std::vector<NodeSummary> Nodes() const;
  // The same nodes in the same order, only what the gauges show: a periodic update over tens of
  // thousands of nodes does not copy their stages, jobs, hosts and hang texts each second.
  std::vector<NodeGauge> Gauges() const;
  NodeLedgerCounters counters() const;
  void SetClassChange(ClassChange callback);

 private:
  struct NodeState {
    NodeClassTracker tracker;
    double gpu_seconds = 0;
    std::map<std::string, NodeStageCost> stages;
    int64_t jobs_seen = 0;
    int64_t jobs_charged = 0;
    std::vector<std::string> jobs;         // last charged, oldest first
    std::vector<std::string> recent_seen;  // last served, so jobs_seen counts each job once
    int64_t first_seen_ns = 0, last_seen_ns = 0, last_charged_ns = 0;
    int64_t hangs = 0, hangs_dead = 0, last_hang_ns = 0;
    std::string last_hang;
  };
  struct JobNodes {
    int64_t last_first_step = -1;
    std::vector<std::string> nodes;
    int64_t last_hang_started_ns = 0;  // the job's last stall charged (its started_unix_ns)
  };
  struct Change {
    NodeSummary node;
    NodeClass before;
  };

  explicit NodeLedger(NodeLedgerOptions options) : options_(std::move(options)) {}
  void ApplyHostLocked(const v1::NodeHostSeen& seen);
  // Charges a hang to its nodes; false (nothing changed) for a stall already charged.
  bool ApplyHangLocked(const v1::NodeHang& hang);
  // Applies a window; fills `changes` with class changes. False for a duplicate.
  bool ApplyLocked(const v1::NodeWindow& window, std::vector<Change>* changes);
  NodeState* NodeLocked(const std::string& node);
  NodeSummary SummaryLocked(const std::string& name, const NodeState& s) const;

  const NodeLedgerOptions options_;
  mutable std::mutex mu_;
  std::unique_ptr<RecordLog> file_;
  std::map<std::string, NodeState> nodes_;
  std::map<std::string, JobNodes> jobs_;
  std::map<std::string, std::pair<std::string, std::string>> hosts_;  // node -> host, address
  NodeLedgerCounters counters_;
  ClassChange on_change_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_NODES_NODE_LEDGER_H_
