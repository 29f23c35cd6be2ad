// Whether a node keeps costing its jobs: healthy, transient (isolated episodes) or chronic (a
// sustained shift), from the sequence of verdict windows it served. Pure and single-threaded;
// the node ledger (node_ledger.h) keeps one per node.
//
// The test is an EWMA of "this window charged the node" (1 or 0), over the windows of every
// job the node served, in the order they closed:
//   e <- (1 - lambda) * e + lambda * charged
// The node turns chronic when e reaches `chronic_enter` after at least `min_charged_windows`
// charged windows, and stays chronic until e falls below `chronic_exit` (hysteresis, so one
// clean window does not flip it back). Otherwise a node charged within its last
// `transient_memory_windows` windows is transient; any other node is healthy. With the
// defaults (lambda 0.2, enter 0.5) four charged windows in a row make a node chronic, and
// one in two charged windows sustained does too; isolated false charges never do.
// docs/node-ledger.md gives the false-alarm rate measured on healthy real runs.
//
//   NodeClassTracker t;
//   t.Observe(/*charged=*/true, config);
//   if (t.cls() == NodeClass::kChronic) ...
#ifndef STAGEFRONTIER_DAEMON_NODES_NODE_CLASS_H_
#define STAGEFRONTIER_DAEMON_NODES_NODE_CLASS_H_

#include <cstdint>

#include "absl/status/status.h"

namespace stagefrontier {

enum class NodeClass { kHealthy = 0, kTransient = 1, kChronic = 2 };

// "healthy", "transient", "chronic".
const char* NodeClassName(NodeClass c);

struct NodeClassConfig {
  double lambda = 0.2;
  double chronic_enter = 0.5;
  double chronic_exit = 0.2;
  int64_t min_charged_windows = 3;
  int64_t transient_memory_windows = 50;
  // A window charges a node (for this test) when the node's suspects hold at least this share
  // of the window's attributed excess: the verdict's dominant straggler, not the minor cells
  // a CLEAR verdict also lists (their GPU-seconds still count in the ledger).
  double charge_share = 0.5;

  // InvalidArgument naming the field unless 0 < lambda <= 1, 0 < exit < enter <= 1,
  // 0 < charge_share <= 1 and the window counts are >= 1.
  [[nodiscard]] absl::Status Validate() const;
};

class NodeClassTracker {
 public:
  // One more window served by the node; `charged` when its verdict charged the node.
  // Returns true when the class changed.
  bool Observe(bool charged, const NodeClassConfig& config);

  NodeClass cls() const { return cls_; }
  double ewma() const { return ewma_; }
  int64_t windows() const { return windows_; }
  int64_t charged_windows() const { return charged_windows_; }
  // Runs of consecutive charged windows (an episode ends at the first uncharged window).
  int64_t episodes() const { return episodes_; }
  // Windows since the last charged one (-1 if never charged).
  int64_t windows_since_charge() const { return since_charge_; }

 private:
  NodeClass cls_ = NodeClass::kHealthy;
  double ewma_ = 0;
  int64_t windows_ = 0;
  int64_t charged_windows_ = 0;
  int64_t episodes_ = 0;
  int64_t since_charge_ = -1;
  bool last_charged_ = false;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_NODES_NODE_CLASS_H_
