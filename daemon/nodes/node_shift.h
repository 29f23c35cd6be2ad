// A whole node slower than its peers, measured step by step. Rank evidence compares each rank
// with its sync group's per-step median; when one node holds a large share of a group (two
// sidecars, half the job each) that median is half made of the node's own ranks, so a
// node-wide slowdown cancels out (the window reads HEALTHY, a group-wide TIE, or CLEAR on one
// of the node's ranks). This step of the verdict pipeline, after the engine and
// NameWholeNode, compares each rank of such a node with the ranks of its sync group that run
// on other nodes, and names the node when every one of its ranks is slower in the stage the
// frontier charged it.
//
//   std::vector<const StepInput*> steps = ...;  // the window's raw steps
//   NameSlowNode(schema, {.rank_nodes = nodes, .group_of_rank = groups}, steps, th, &v);
//   if (!v.node.empty()) page_the_node_owner(v.node);
#ifndef STAGEFRONTIER_DAEMON_NODES_NODE_SHIFT_H_
#define STAGEFRONTIER_DAEMON_NODES_NODE_SHIFT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/accounting/step_input.h"
#include "daemon/accounting/verdict.h"
#include "shm/stage_schema.h"

namespace stagefrontier {

// Where the job's ranks run and whom they wait with.
struct RankPlacement {
  std::vector<std::string> rank_nodes;  // rank r's node; "" unknown
  std::vector<int32_t> group_of_rank;   // rank r's sync group; empty: one group
};

struct NodeShiftThresholds {
  double z_strong = 5.0;   // the node's per-step shift, in standard errors
  double z_support = 3.0;  // each of its ranks' own shift
  // The node's mean shift per step, as a fraction of the window's mean exposed step.
  double material_fraction = 0.02;
  // The engine's noise gate: fewer flagged steps, or less excess than this share of the
  // exposed time, and the window stays HEALTHY whatever the node evidence.
  int32_t min_flagged_steps = 3;
  double healthy_fraction = 0.002;
};

// One node's shift in one stage against the ranks of the same sync groups on other nodes.
struct NodeShift {
  std::string node;
  int32_t stage = -1;
  std::vector<int32_t> ranks;    // the node's ranks that had peers elsewhere, ascending
  double shift_ns = 0;           // mean over steps of the node's median deviation
  double z = 0;                  // shift_ns in standard errors of its per-step values
  double min_rank_shift_ns = 0;  // the least shifted of its ranks
  double min_rank_z = 0;         // the least certain of its ranks
  int32_t steps = 0;
  // Recurring (1 step in 4 barely moves a mean over noisy steps): the steps where the node's
  // deviation is beyond kOutlierScales robust noise scales above zero, those as far below,
  // (above - below) / sqrt(above + below), the node's mean deviation in those steps and the
  // least of its ranks' there.
  int32_t outlier_steps = 0;
  int32_t opposite_steps = 0;
  double outlier_z = 0;
  double outlier_mean_ns = 0;
  double min_rank_outlier_mean_ns = 0;
  // The largest of its ranks' mean deviations in the other steps: a node-wide recurring fault
  // leaves every rank near its peers there; one rank slow in every step is that rank's fault,
  // whose steps the node's median joins whenever another rank of the node hiccups.
  double max_rank_other_mean_ns = 0;
  bool recurring = false;  // named by the recurring test (NameSlowNode)
};

// The noise scale's floor: exact synthetic steps would otherwise make every step an outlier.
inline constexpr double kMinOutlierScaleNs = 10'000;

// Per stage, at most this many of the nodes to compare are measured exactly: those whose ranks'
// mean duration most exceeds their groups' other ranks' (bounds a window's cost when thousands
// of nodes qualify, e.g. small role groups).
inline constexpr size_t kMaxNodesMeasured = 4;

// Fewer steps with a comparison than this measure nothing.
inline constexpr int32_t kMinNodeShiftSteps = 10;

// The nodes worth this comparison: two or more ranks with peers on other nodes, holding at
// least an eighth of some sync group (a smaller node barely moves its group's median: rank
// evidence and NameWholeNode judge it).
std::vector<std::string> NodesToCompare(const RankPlacement& placement);

// The shift of `node` in `stage` over `steps` (a rank's duration minus the median of the
// present ranks of its group not on the node, per step; the node's deviation is the median
// over its present ranks). steps = 0 when nothing could be compared.
NodeShift MeasureNodeShift(const std::vector<const StepInput*>& steps, const StageSchema& schema,
                           const RankPlacement& placement, const std::string& node, int32_t stage);

// Names a node when, in some work stage (StageSchema::IsWork), a compared node's shift is material
// and strong with every one of its ranks supported and shifted at least half as much; or it recurs
// (kMinOutlierSteps or more outlier steps, outlier_z >= z_support, material in those steps, every
// rank at least half as shifted there). The largest mean shift wins. The cells do not decide: the
// frontier often charges the ranks that waited for the node, in their stage. The verdict becomes
// CLEAR on the node (candidates: its ranks; suspects: its ranks sharing the stage's excess),
// whatever it was (HEALTHY past the noise gate, a group-wide TIE, CLEAR on one of its ranks).
// Leaves it alone when a node is already named or nothing qualifies.
void NameSlowNode(const StageSchema& schema, const RankPlacement& placement,
                  const std::vector<const StepInput*>& steps, const NodeShiftThresholds& th,
                  Verdict* v);

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_NODES_NODE_SHIFT_H_
