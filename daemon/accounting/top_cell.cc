#include "daemon/accounting/top_cell.h"

#include <cmath>

namespace stagefrontier {
namespace {

// The work stage of member m with the largest shift among those `pick` accepts; -1 if none.
template <typename Pick>
int LargestShiftStage(const RankSupport& support, const StageSchema& schema, int m, Pick pick) {
  int best = -1;
  for (int k = 0; k < static_cast<int>(schema.size()); ++k) {
    if (schema.IsWork(static_cast<size_t>(k)) && pick(k) &&
        (best < 0 || support.at(k, m).shift_ns > support.at(best, m).shift_ns)) {
      best = k;
    }
  }
  return best;
}

// A late arrival at a wait is explained by the rank's own slower work stage, when it has one.
int OwnSupportedStage(const RankSupport& support, const StageSchema& schema, int m) {
  return LargestShiftStage(support, schema, m, [&](int k) { return support.Supported(k, m); });
}

// The rank's own durations say where its time went: another stage strongly slower on the
// same rank, by more than the charged one, is where to look (the frontier charges where the
// lateness surfaced: a slow optimizer step shows at the next forward's first wait).
int StrongerOwnStage(const RankSupport& support, const StageSchema& schema, int k0, int m) {
  const double charged = support.at(k0, m).shift_ns;
  return LargestShiftStage(support, schema, m, [&](int k) {
    return k != k0 && support.Strong(k, m) && support.at(k, m).shift_ns > charged;
  });
}

// The entry `usable` accepts whose window ended last before `first_step`; null if none.
template <typename T, typename Usable>
const T* LatestBefore(std::span<const T> entries, int64_t first_step, Usable usable) {
  const T* latest = nullptr;
  for (const T& e : entries) {
    if (usable(e) && e.last_step < first_step &&
        (latest == nullptr || e.last_step > latest->last_step)) {
      latest = &e;
    }
  }
  return latest;
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
  return LatestBefore(held, first_step, [](const PriorHeld& h) { return h.last_step >= 0; });
}

CarriedCell CarryPriorClear(std::span<const PriorClear> named, int64_t first_step,
                            const RankSupport& support, const StageSchema& schema, int members) {
  const PriorClear* prior =
      LatestBefore(named, first_step, [](const PriorClear& c) { return c.stage >= 0; });
  if (prior == nullptr || prior->member < 0 || prior->member >= members ||
      !schema.IsWork(static_cast<size_t>(prior->stage)) ||
      !support.StillSupported(prior->stage, prior->member)) {
    return {};
  }
  return {{prior->stage, prior->member}, prior->last_step};
}

bool ConfirmedByPrior(const RankSupport& support, CellRef cell, const PriorHeld& prior) {
  const auto [k, m] = cell;
  if (support.Supported(k, m) && Contains(prior.cells, cell)) return true;
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
    const int own = LargestShiftStage(support, schema, m, [&](int k) {
      return ConfirmedByPrior(support, {k, m}, *prior);
    });
    if (own >= 0) return {own, m};
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
