#include "daemon/accounting/top_cell.h"

#include <algorithm>
#include <cmath>

namespace stagefrontier {
namespace {

// A late arrival at a wait is explained by the rank's own slower work stage, when it has one.
int OwnSupportedStage(const RankSupport& support, const StageSchema& schema, int m) {
  int best = -1;
  for (int k = 0; k < static_cast<int>(schema.size()); ++k) {
    if (schema.IsWork(static_cast<size_t>(k)) && support.Supported(k, m) &&
        (best < 0 || support.at(k, m).shift_ns > support.at(best, m).shift_ns)) {
      best = k;
    }
  }
  return best;
}

// The rank's own durations say where its time went: another stage strongly slower on the
// same rank, by more than the charged one, is where to look (the frontier charges where the
// lateness surfaced: a slow optimizer step shows at the next forward's first wait).
int StrongerOwnStage(const RankSupport& support, const StageSchema& schema, int k0, int m) {
  int best = -1;
  for (int k = 0; k < static_cast<int>(schema.size()); ++k) {
    if (k == k0 || !schema.IsWork(static_cast<size_t>(k))) continue;
    const double shift = support.at(k, m).shift_ns;
    if (support.Strong(k, m) && shift > support.at(k0, m).shift_ns &&
        (best < 0 || shift > support.at(best, m).shift_ns)) {
      best = k;
    }
  }
  return best;
}

}  // namespace

CellRef StrongestCell(const RankSupport& support, const StageSchema& schema, int members) {
  CellRef strong;
  for (int k = 0; k < static_cast<int>(schema.size()); ++k) {
    if (!schema.IsWork(static_cast<size_t>(k))) continue;
    for (int m = 0; m < members; ++m) {
      if (support.Strong(k, m) &&
          (!strong.valid() ||
           support.at(k, m).shift_ns > support.at(strong.stage, strong.member).shift_ns)) {
        strong = {k, m};
      }
    }
  }
  return strong;
}

const PriorHeld* PriorWindow(std::span<const PriorHeld> held, int64_t first_step) {
  const PriorHeld* prior = nullptr;
  for (const PriorHeld& h : held) {
    if (h.last_step >= 0 && h.last_step < first_step &&
        (prior == nullptr || h.last_step > prior->last_step)) {
      prior = &h;
    }
  }
  return prior;
}

CarriedCell CarryPriorClear(std::span<const PriorClear> named, int64_t first_step,
                            const RankSupport& support, const StageSchema& schema, int members) {
  const PriorClear* prior = nullptr;
  for (const PriorClear& c : named) {
    if (c.stage >= 0 && c.last_step < first_step &&
        (prior == nullptr || c.last_step > prior->last_step)) {
      prior = &c;
    }
  }
  if (prior == nullptr || prior->member < 0 || prior->member >= members ||
      !schema.IsWork(static_cast<size_t>(prior->stage)) ||
      !support.StillSupported(prior->stage, prior->member)) {
    return {};
  }
  return {{prior->stage, prior->member}, prior->last_step};
}

bool ConfirmedByPrior(const RankSupport& support, CellRef cell, const PriorHeld& prior) {
  const auto [k, m] = cell;
  if (support.Supported(k, m) &&
      std::find(prior.cells.begin(), prior.cells.end(), cell) != prior.cells.end()) {
    return true;
  }
  if (!support.Leans(k, m)) return false;
  for (const CellZ& before : prior.leaning) {
    if (before.cell == cell) {
      return (support.at(k, m).z + before.z) / std::sqrt(2.0) >= kPersistZ;
    }
  }
  return false;
}

CellRef ConfirmedChargedCell(const ExcessTable& table, const RankSupport& support,
                             const StageSchema& schema, const PriorHeld* prior, double min_share) {
  if (prior == nullptr) return {};
  for (const size_t c : table.order) {
    if (table.Share(c) < min_share) break;
    const int k0 = table.StageOf(c);
    const int m = table.MemberOf(c);
    if (schema.IsWork(static_cast<size_t>(k0))) {
      if (ConfirmedByPrior(support, {k0, m}, *prior)) return {k0, m};
      continue;
    }
    if (!schema.IsWait(static_cast<size_t>(k0))) continue;
    // A late arrival: the rank's own confirmed stage with the largest shift.
    CellRef own;
    for (int k = 0; k < static_cast<int>(schema.size()); ++k) {
      if (schema.IsWork(static_cast<size_t>(k)) && ConfirmedByPrior(support, {k, m}, *prior) &&
          (!own.valid() || support.at(k, m).shift_ns > support.at(own.stage, m).shift_ns)) {
        own = {k, m};
      }
    }
    if (own.valid()) return own;
  }
  return {};
}

TopCellChoice ChooseTopCell(const ExcessTable& table, const RankSupport& support,
                            const StageSchema& schema, CellRef strong, const CarriedCell& carried,
                            CellRef confirmed) {
  TopCellChoice out;
  const size_t top = table.order.front();
  out.cell = {table.StageOf(top), table.MemberOf(top)};
  if (!support.Supported(out.cell.stage, out.cell.member)) {
    if (!strong.valid() && confirmed.valid()) {
      out.cell = confirmed;
      out.confirmed = true;
      return out;
    }
    if (!strong.valid()) {
      out.basis = TopCellBasis::kGroup;
      return out;
    }
    out.basis = TopCellBasis::kEvidence;
    out.cell = strong;
    out.carried = carried.cell.valid();
    out.carried_from = carried.from;
    return out;
  }
  const int m = out.cell.member;
  const int best = schema.IsWait(static_cast<size_t>(out.cell.stage))
                       ? OwnSupportedStage(support, schema, m)
                       : StrongerOwnStage(support, schema, out.cell.stage, m);
  if (best >= 0) out.cell.stage = best;
  return out;
}

}  // namespace stagefrontier
