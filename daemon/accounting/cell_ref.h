// One (stage, member) cell of a group's stage x member tables: the excess table, the rank
// evidence, the cells a verdict names.
//
//   CellRef top{/*stage=*/2, /*member=*/5};
//   if (top.valid()) { ... }
#ifndef STAGEFRONTIER_DAEMON_ACCOUNTING_CELL_REF_H_
#define STAGEFRONTIER_DAEMON_ACCOUNTING_CELL_REF_H_

#include <algorithm>
#include <span>

namespace stagefrontier {

struct CellRef {
  int stage = -1;
  int member = -1;
  bool valid() const { return stage >= 0; }
  bool operator==(const CellRef&) const = default;
};

inline bool Contains(std::span<const CellRef> cells, CellRef cell) {
  return std::find(cells.begin(), cells.end(), cell) != cells.end();
}

// A cell with its mean-shift z in one window (RankEvidence::z).
struct CellZ {
  CellRef cell;
  double z = 0;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_ACCOUNTING_CELL_REF_H_
