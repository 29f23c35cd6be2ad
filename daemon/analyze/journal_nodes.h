// Charges recorded jobs to nodes offline: replays coordinator journals (in the order given,
// as if the jobs ran one after another on the same nodes) through the engine and records
// every closed job window in a node ledger (daemon/nodes/node_ledger.h). Journals do not say
// which node served a rank, so ranks are placed by `ranks_per_node`: rank r on node
// "<prefix><r / ranks_per_node>". `stagefrontier nodes` uses it to rebuild a ledger and to
// measure the class test's false-alarm rate on healthy runs (docs/node-ledger.md).
//
//   NodeLedger ledger = ...;
//   absl::StatusOr<JournalNodesStats> s = ChargeJournal(path, opts, ledger.get());
#ifndef STAGEFRONTIER_DAEMON_ANALYZE_JOURNAL_NODES_H_
#define STAGEFRONTIER_DAEMON_ANALYZE_JOURNAL_NODES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/nodes/node_ledger.h"

namespace stagefrontier {

struct JournalNodesOptions {
  int window_steps = 100;
  int ranks_per_node = 8;
  std::string node_prefix = "node";
  // The job's name in the ledger ("" : the journal's job id). The ledger takes a job's windows
  // only past its last recorded one, so two recorded runs of the same job id need two names.
  std::string job_name;
};

struct JournalNodesStats {
  int64_t windows = 0;           // job windows recorded
  int64_t charging_windows = 0;  // windows that charged some node
};

// InvalidArgument for ranks_per_node < 1 or a journal that is not one (ReadJournalAsRun's
// errors, naming the file); the engine's errors for a run it refuses.
[[nodiscard]] absl::StatusOr<JournalNodesStats> ChargeJournal(const std::string& path,
                                                              const JournalNodesOptions& options,
                                                              NodeLedger* ledger);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ANALYZE_JOURNAL_NODES_H_
