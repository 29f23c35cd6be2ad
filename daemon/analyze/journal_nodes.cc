#include "daemon/analyze/journal_nodes.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/accounting/engine.h"
#include "daemon/analyze/journal_export.h"
#include "daemon/nodes/node_window.h"

namespace stagefrontier {

absl::StatusOr<JournalNodesStats> ChargeJournal(const std::string& path,
                                                const JournalNodesOptions& options,
                                                NodeLedger* ledger) {
  if (options.ranks_per_node < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ranks per node ", options.ranks_per_node, " must be >= 1"));
  }
  absl::StatusOr<JournalRun> r = ReadJournalAsRun(path);
  if (!r.ok()) return r.status();
  const RecordedRun& run = r->run;
  JobConfig job{*run.schema, run.world_size, run.groups, {}, false, EngineConfig{}, "", {}};
  job.engine.window_steps = options.window_steps;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(job);
  if (!engine.ok()) return engine.status();
  std::vector<std::string> nodes(static_cast<size_t>(run.world_size));
  for (int32_t rank = 0; rank < run.world_size; ++rank) {
    nodes[rank] = absl::StrCat(options.node_prefix, rank / options.ranks_per_node);
  }
  JournalNodesStats stats;
  for (const auto& [step, input] : run.steps) {
    if (absl::Status s = (*engine)->AddStep(input); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
    }
    for (const Verdict& v : (*engine)->TakeClosedVerdicts()) {
      if (v.group != "job") continue;
      const v1::NodeWindow w =
          NodeWindowFromVerdict(options.job_name.empty() ? run.job : options.job_name,
                                run.world_size, *run.schema, v, nodes, false, 0);
      if (ledger->Record(w)) {
        ++stats.windows;
        if (w.charges_size() > 0) ++stats.charging_windows;
      }
    }
  }
  return stats;
}

}  // namespace stagefrontier
