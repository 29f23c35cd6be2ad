#include "daemon/nodes/nodes_text.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace stagefrontier {
namespace {

// UTC, to the second ("-" for 0).
std::string UnixTime(int64_t unix_ns) {
  if (unix_ns <= 0) return "-";
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixNanos(unix_ns), absl::UTCTimeZone());
}

// "host (address)", whichever are known, or "-".
std::string Host(const v1::NodeInfo& n) {
  if (n.host().empty()) return n.address().empty() ? "-" : n.address();
  return n.address().empty() ? n.host() : absl::StrCat(n.host(), " (", n.address(), ")");
}

}  // namespace

std::string RenderNodesText(const v1::ListNodesReply& r) {
  std::string out =
      absl::StrFormat("%d nodes in the ledger, %d windows recorded", r.total_nodes(), r.windows());
  if (r.unattributed() > 0)
    absl::StrAppend(&out, ", ", r.unattributed(), " charges without a node");
  if (r.nodes_refused() > 0)
    absl::StrAppend(&out, ", ", r.nodes_refused(), " nodes over the bound");
  absl::StrAppend(&out, "\n");
  if (r.nodes().empty()) return out;
  absl::StrAppend(
      &out, absl::StrFormat("%-4s %-24s %-24s %-10s %12s %9s %6s %5s %5s %-20s %-24s %-20s %-20s\n",
                            "#", "NODE", "HOST", "CLASS", "WASTED GPU-s", "CHARGED", "EWMA", "JOBS",
                            "HANGS", "STAGES", "LAST JOBS", "FIRST SEEN", "LAST SEEN"));
  int i = 0;
  for (const v1::NodeInfo& n : r.nodes()) {
    std::string stages;
    for (int k = 0; k < n.stages_size() && k < 3; ++k) {
      absl::StrAppend(&stages, k ? "," : "", n.stages(k).stage());
    }
    std::string jobs;
    for (int k = std::max(0, n.jobs_size() - 3); k < n.jobs_size(); ++k) {
      absl::StrAppend(&jobs, jobs.empty() ? "" : ",", n.jobs(k));
    }
    absl::StrAppend(
        &out, absl::StrFormat(
                  "%-4d %-24s %-24s %-10s %12.2f %4d/%-4d %6.2f %5d %5d %-20s %-24s %-20s %-20s\n",
                  ++i, n.node(), Host(n), n.node_class(), n.wasted_gpu_seconds(),
                  n.charged_windows(), n.windows(), n.ewma(), n.jobs_charged(), n.hangs(),
                  stages.empty() ? "-" : stages, jobs.empty() ? "-" : jobs,
                  UnixTime(n.first_seen_unix_ns()), UnixTime(n.last_seen_unix_ns())));
  }
  // Where each node's last hang was: the table has no room for it.
  bool header = false;
  for (const v1::NodeInfo& n : r.nodes()) {
    if (n.hangs() == 0) continue;
    if (!header) absl::StrAppend(&out, "\nhangs (stalls with a rank of the node stuck or dead):\n");
    header = true;
    absl::StrAppend(
        &out, absl::StrFormat("  %s: %d (%d dead), last %s: %s\n", n.node(), n.hangs(),
                              n.hangs_dead(), UnixTime(n.last_hang_unix_ns()), n.last_hang()));
  }
  return out;
}

}  // namespace stagefrontier
