#include "daemon/nodes/nodes_reply.h"

#include "absl/strings/str_cat.h"

namespace stagefrontier {

void NodeSummaryToProto(const NodeSummary& n, v1::NodeInfo* out) {
  out->set_node(n.node);
  out->set_node_class(NodeClassName(n.cls));
  out->set_ewma(n.ewma);
  out->set_wasted_gpu_seconds(n.gpu_seconds);
  for (const NodeStageCost& s : n.stages) {
    v1::NodeStageCost* p = out->add_stages();
    p->set_stage(s.stage);
    p->set_wasted_gpu_seconds(s.gpu_seconds);
    p->set_windows(s.windows);
  }
  out->set_windows(n.windows);
  out->set_charged_windows(n.charged_windows);
  out->set_episodes(n.episodes);
  out->set_jobs_seen(n.jobs_seen);
  out->set_jobs_charged(n.jobs_charged);
  for (const std::string& j : n.jobs) out->add_jobs(j);
  out->set_first_seen_unix_ns(n.first_seen_ns);
  out->set_last_seen_unix_ns(n.last_seen_ns);
  out->set_last_charged_unix_ns(n.last_charged_ns);
  out->set_host(n.host);
  out->set_address(n.address);
  out->set_hangs(n.hangs);
  out->set_hangs_dead(n.hangs_dead);
  out->set_last_hang_unix_ns(n.last_hang_ns);
  out->set_last_hang(n.last_hang);
}

absl::Status FillListNodes(const NodeLedger& ledger, const v1::ListNodesRequest& request,
                           v1::ListNodesReply* reply) {
  const std::string& want = request.node_class();
  if (!want.empty() && want != "healthy" && want != "transient" && want != "chronic") {
    return absl::InvalidArgumentError(absl::StrCat("unknown node class '", want.substr(0, 64),
                                                   "' (healthy, transient or chronic)"));
  }
  if (request.limit() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("limit ", request.limit(), " is negative"));
  }
  const std::vector<NodeSummary> nodes = ledger.Nodes();
  const NodeLedgerCounters c = ledger.counters();
  reply->set_total_nodes(static_cast<int32_t>(nodes.size()));
  reply->set_windows(c.windows);
  reply->set_unattributed(c.unattributed);
  reply->set_nodes_refused(c.nodes_refused);
  for (const NodeSummary& n : nodes) {
    if (!want.empty() && want != NodeClassName(n.cls)) continue;
    if (request.limit() > 0 && reply->nodes_size() >= request.limit()) break;
    NodeSummaryToProto(n, reply->add_nodes());
  }
  return absl::OkStatus();
}

}  // namespace stagefrontier
