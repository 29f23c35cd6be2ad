#include "daemon/nodes/node_verdict.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace stagefrontier {

namespace {

std::vector<int32_t> NamedRanks(const Verdict& v, std::span<const int32_t> deciding_group) {
  std::vector<int32_t> ranks;
  if (v.suspects.empty()) return ranks;
  const Suspect& top = v.suspects[0];
  if (v.label == VerdictLabel::kAmbiguous && v.reason == AmbiguityReason::kTie) {
    ranks = v.candidate_ranks;
  } else {
    // The heatmap's cells, not the five suspects: a node has up to 8 or 16 ranks. The frontier
    // charges each step's last rank, so a node's equally slow ranks split its steps unevenly:
    // an eighth of the top cell counts.
    for (const ExcessCell& c : v.excess_cells) {
      if (!deciding_group.empty() &&
          !std::binary_search(deciding_group.begin(), deciding_group.end(), c.rank)) {
        continue;
      }
      if (c.stage == top.stage && 8 * c.excess_ns >= top.excess_ns) ranks.push_back(c.rank);
    }
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

}  // namespace

void NameWholeNode(const StageSchema& schema, const std::vector<std::string>& rank_nodes,
                   Verdict* v, std::span<const int32_t> deciding_group) {
  if (v->label == VerdictLabel::kHealthy || v->group_wide || v->suspects.empty()) return;
  const std::vector<int32_t> named = NamedRanks(*v, deciding_group);
  if (named.size() < 2) return;
  // The cells may be the ranks that waited (a verdict decided on rank evidence names a rank
  // the frontier barely charged): the node must hold the rank the verdict names first.
  if (!std::binary_search(named.begin(), named.end(), v->suspects[0].rank)) return;
  for (int32_t r : named) {
    if (r < 0 || static_cast<size_t>(r) >= rank_nodes.size() || rank_nodes[r].empty()) return;
  }
  const std::string& node = rank_nodes[named[0]];
  std::vector<int32_t> on_node;
  bool other_node = false;
  for (size_t r = 0; r < rank_nodes.size(); ++r) {
    if (rank_nodes[r] == node) {
      on_node.push_back(static_cast<int32_t>(r));
    } else if (!rank_nodes[r].empty()) {
      other_node = true;
    }
  }
  if (!other_node || on_node != named) return;
  const int32_t stage = v->suspects[0].stage;
  const std::string stage_name = stage >= 0 && static_cast<size_t>(stage) < schema.size()
                                     ? schema.stage(static_cast<size_t>(stage)).name
                                     : "?";
  v->node = node;
  v->label = VerdictLabel::kClear;
  v->reason = AmbiguityReason::kNone;
  v->candidate_ranks = named;
  v->candidate_stages = {stage};
  v->settle.clear();
  v->explanation =
      absl::StrCat("node ", node, ": all ", named.size(), " of its ranks slow in ", stage_name,
                   " (the node's fault, not one rank's). ", v->explanation);
}

}  // namespace stagefrontier
