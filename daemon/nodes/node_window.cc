#include "daemon/nodes/node_window.h"

#include <algorithm>

namespace stagefrontier {

bool WindowCharges(const Verdict& verdict, bool unreliable) {
  return verdict.group == "job" && verdict.label == VerdictLabel::kClear && !verdict.group_wide &&
         !unreliable;
}

v1::NodeWindow NodeWindowFromVerdict(const std::string& job, int32_t world_size,
                                     const StageSchema& schema, const Verdict& verdict,
                                     const std::vector<std::string>& rank_nodes, bool unreliable,
                                     int64_t wall_time_ns) {
  v1::NodeWindow w;
  w.set_job(job);
  w.set_first_step(verdict.first_step);
  w.set_last_step(verdict.last_step);
  w.set_world_size(world_size);
  w.set_label(VerdictLabelName(verdict.label));
  w.set_wall_time_ns(wall_time_ns);
  w.set_unreliable(unreliable);
  // Ranks of a node are mostly consecutive: skip repeats so that 12,500 names sort, not 100,000.
  std::vector<std::string> nodes;
  for (const std::string& n : rank_nodes) {
    if (!n.empty() && (nodes.empty() || nodes.back() != n)) nodes.push_back(n);
  }
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  for (std::string& n : nodes) w.add_nodes(std::move(n));
  w.set_nodes_changed(true);
  if (!WindowCharges(verdict, unreliable)) return w;
  if (!verdict.node.empty()) {
    // A node-wide fault is charged to the node once: its ranks' excess in the top stage.
    const Suspect& top = verdict.suspects[0];
    v1::NodeCharge* c = w.add_charges();
    c->set_node(verdict.node);
    if (top.stage >= 0 && static_cast<size_t>(top.stage) < schema.size()) {
      c->set_stage(schema.stage(top.stage).name);
    }
    c->set_rank(top.rank);
    c->set_waiting_ranks(std::max(world_size - 1, 0));
    for (const ExcessCell& e : verdict.excess_cells) {
      const bool on_node = e.rank >= 0 && static_cast<size_t>(e.rank) < rank_nodes.size() &&
                           rank_nodes[e.rank] == verdict.node;
      if (e.stage != top.stage || !on_node || e.excess_ns <= 0) continue;
      c->set_excess_ns(c->excess_ns() + e.excess_ns);
    }
    if (verdict.total_excess_ns > 0) {
      c->set_share(static_cast<double>(c->excess_ns()) /
                   static_cast<double>(verdict.total_excess_ns));
    }
    return w;
  }
  for (const Suspect& s : verdict.suspects) {
    if (s.excess_ns <= 0) continue;
    v1::NodeCharge* c = w.add_charges();
    if (s.rank >= 0 && static_cast<size_t>(s.rank) < rank_nodes.size()) {
      c->set_node(rank_nodes[s.rank]);
    }
    if (s.stage >= 0 && static_cast<size_t>(s.stage) < schema.size()) {
      c->set_stage(schema.stage(s.stage).name);
    }
    c->set_rank(s.rank);
    c->set_excess_ns(s.excess_ns);
    c->set_waiting_ranks(std::max(world_size - 1, 0));
    c->set_share(s.share);
  }
  return w;
}

}  // namespace stagefrontier
