#include "daemon/accounting/stall_decider.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/common/duration_format.h"

namespace stagefrontier {
namespace {

constexpr size_t kRanksInText = 8;

// "rank 3", "ranks 1, 2", "ranks 0, 1, 2, ... (12 in all)".
std::string RankList(const std::vector<int32_t>& ranks) {
  if (ranks.size() == 1) return absl::StrCat("rank ", ranks[0]);
  std::vector<int32_t> shown(ranks.begin(), ranks.begin() + std::min(ranks.size(), kRanksInText));
  std::string out = absl::StrCat("ranks ", absl::StrJoin(shown, ", "));
  if (ranks.size() > kRanksInText) absl::StrAppend(&out, ", ... (", ranks.size(), " in all)");
  return out;
}

std::string Where(const StageSchema& schema, const RankPosition& p) {
  if (p.stage < 0) return absl::StrCat("between steps ", p.step, " and ", p.step + 1);
  return absl::StrCat(schema.stage(static_cast<size_t>(p.stage)).name, " of step ", p.step);
}

// The rank is known to be in a wait (sync) stage of the schema.
bool InWaitStage(const StallInputs& in, const RankPosition& p) {
  return p.known && p.stage >= 0 && static_cast<size_t>(p.stage) < in.schema.size() &&
         in.schema.IsWait(static_cast<size_t>(p.stage));
}

// The ranks of one kind, classified once.
struct Census {
  std::vector<int32_t> active, dead, lost, known, waiting, other;
  bool heard = false;  // some active rank's sidecar reported since this process started
};

Census Count(const StallInputs& in) {
  Census c;
  for (size_t r = 0; r < in.ranks.size(); ++r) {
    const RankPosition& p = in.ranks[r];
    const int32_t rank = static_cast<int32_t>(r);
    if (p.finished) continue;
    c.active.push_back(rank);
    c.heard = c.heard || p.heard;
    if (p.process_gone) {
      c.dead.push_back(rank);
    } else if (p.sidecar_lost) {
      c.lost.push_back(rank);
    } else if (p.known) {
      c.known.push_back(rank);
      (InWaitStage(in, p) ? c.waiting : c.other).push_back(rank);
    }
  }
  return c;
}

StallDecision Begin(StallKind kind, bool alarm) {
  StallDecision d;
  d.kind = kind;
  d.alarm = alarm;
  return d;
}

void Name(const std::vector<int32_t>& ranks, const char* role, StallDecision* d) {
  const size_t most = std::string_view(role) == "waiting" ? kWaitingNamed : kCulpritsNamed;
  for (size_t i = 0; i < ranks.size() && i < most; ++i) {
    d->named.push_back({ranks[i], role});
  }
}

// Longest open first: the rank stuck longest is the likeliest cause.
void ByOpenTime(const StallInputs& in, std::vector<int32_t>* ranks) {
  std::stable_sort(ranks->begin(), ranks->end(),
                   [&](int32_t a, int32_t b) { return in.ranks[a].open_ns > in.ranks[b].open_ns; });
}

// A hang: `stuck` named longest open first, then `waiting`; the text opens with the first stuck
// rank ("rank 0 stuck in forward of step 150 for 5.5 s") and goes on with `tail`.
StallDecision Stuck(const StallInputs& in, std::vector<int32_t> stuck,
                    const std::vector<int32_t>& waiting, const std::string& tail) {
  StallDecision d = Begin(StallKind::kHung, true);
  ByOpenTime(in, &stuck);
  Name(stuck, "stuck", &d);
  Name(waiting, "waiting", &d);
  d.waiting = static_cast<int32_t>(waiting.size());
  const RankPosition& p = in.ranks[stuck[0]];
  d.text = absl::StrCat(RankList(stuck), " stuck in ", Where(in.schema, p), " for ",
                        FormatSeconds(static_cast<double>(p.open_ns)), tail);
  return d;
}

// "; 2 ranks wait in grad_sync of step 150", or where each waits when they wait in different
// places (DDP's buffer broadcast at the start of forward holds the authoritative rank while the
// others went on to the gradient all-reduce): "; 2 ranks wait: 1 in buffer_sync of step 101,
// 1 in grad_sync of step 101".
std::string WaitingTail(const StallInputs& in, const std::vector<int32_t>& waiting) {
  if (waiting.empty()) return "";
  std::vector<std::pair<std::string, int>> places;  // in order of the first rank there
  for (int32_t r : waiting) {
    std::string where = Where(in.schema, in.ranks[r]);
    auto it =
        std::find_if(places.begin(), places.end(), [&](const auto& p) { return p.first == where; });
    if (it == places.end()) {
      places.emplace_back(std::move(where), 1);
    } else {
      ++it->second;
    }
  }
  const std::string count =
      absl::StrCat("; ", waiting.size(), waiting.size() == 1 ? " rank waits" : " ranks wait");
  if (places.size() == 1) return absl::StrCat(count, " in ", places[0].first);
  constexpr size_t kPlacesInText = 3;
  std::vector<std::string> shown;
  for (size_t i = 0; i < std::min(places.size(), kPlacesInText); ++i) {
    shown.push_back(absl::StrCat(places[i].second, " in ", places[i].first));
  }
  if (places.size() > kPlacesInText) shown.push_back("...");
  return absl::StrCat(count, ": ", absl::StrJoin(shown, ", "));
}

StallDecision Dead(const StallInputs& in, const Census& c) {
  StallDecision d = Begin(StallKind::kDead, true);
  // Who left first: a rank that raised in its own work is the cause (a launcher then kills the
  // others, as torchrun does), then a killed one; a rank that raised while it waited in a
  // collective, or raised the collective's own error, is that collective's victim (Gloo raises
  // when a peer's connection closes).
  const auto order = [&](int32_t r) {
    const RankPosition& p = in.ranks[r];
    return !p.raised ? 1 : (p.raised_in_collective || InWaitStage(in, p)) ? 2 : 0;
  };
  std::vector<int32_t> dead = c.dead;
  std::stable_sort(dead.begin(), dead.end(),
                   [&](int32_t a, int32_t b) { return order(a) < order(b); });
  Name(dead, "dead", &d);
  Name(c.waiting, "waiting", &d);
  d.waiting = static_cast<int32_t>(c.waiting.size());
  const RankPosition& p = in.ranks[dead[0]];
  const std::string where =
      absl::StrCat(p.known ? absl::StrCat(" in ", Where(in.schema, p)) : "",
                   p.node.empty() ? "" : absl::StrCat(" on node ", std::string(p.node)));
  const bool any_raised =
      std::any_of(dead.begin(), dead.end(), [&](int32_t r) { return in.ranks[r].raised; });
  if (any_raised) {
    const std::vector<int32_t> others(dead.begin() + 1, dead.end());
    d.text = absl::StrCat(
        "rank ", dead[0],
        " is gone: ", p.raised ? "its trainer ended on an uncaught exception" : "its process died",
        where,
        others.empty() ? ""
                       : absl::StrCat("; ", RankList(others), others.size() == 1 ? " is" : " are",
                                      " gone too"),
        WaitingTail(in, c.waiting));
    return d;
  }
  d.text = absl::StrCat(RankList(dead), dead.size() == 1 ? " is" : " are",
                        " gone: ", dead.size() == 1 ? "its process" : "their processes", " died",
                        where, WaitingTail(in, c.waiting));
  return d;
}

// Every known rank waits in a sync stage, not all in the same one: laggards at an earlier step
// (at most half) are stuck inside a collective the others finished; otherwise a desync.
StallDecision AllWaiting(const StallInputs& in, const Census& c) {
  std::map<std::pair<int64_t, int32_t>, std::vector<int32_t>> at;  // (step, stage) -> ranks
  for (int32_t r : c.waiting) at[{in.ranks[r].step, in.ranks[r].stage}].push_back(r);
  const RankPosition& first = in.ranks[c.waiting[0]];
  if (at.size() == 1) {
    StallDecision d = Begin(StallKind::kCollective, true);
    // Named although no rank is to blame: the stacks are asked of named ranks.
    Name(c.waiting, "waiting", &d);
    d.waiting = static_cast<int32_t>(c.waiting.size());
    d.text = absl::StrCat("every rank waits in ", Where(in.schema, first), " for ",
                          FormatSeconds(static_cast<double>(first.open_ns)),
                          ": nothing on the host side holds it (the network, or a collective "
                          "that never completes)");
    return d;
  }
  const int64_t lowest = at.begin()->first.first;
  std::vector<int32_t> behind, rest;
  for (int32_t r : c.waiting) (in.ranks[r].step == lowest ? behind : rest).push_back(r);
  bool one_stage_per_step = true;
  for (auto it = at.begin(); it != at.end(); ++it) {
    auto next = std::next(it);
    if (next != at.end() && next->first.first == it->first.first) one_stage_per_step = false;
  }
  if (one_stage_per_step && !rest.empty() && behind.size() * 2 <= c.waiting.size()) {
    return Stuck(in, behind, rest,
                 absl::StrCat(", a collective the others finished", WaitingTail(in, rest)));
  }
  StallDecision d = Begin(StallKind::kDesync, true);
  std::vector<std::string> groups;
  for (const auto& [where, ranks] : at) {
    groups.push_back(
        absl::StrCat(Where(in.schema, in.ranks[ranks[0]]), " (", RankList(ranks), ")"));
    Name(ranks, "waiting", &d);
  }
  d.waiting = static_cast<int32_t>(c.waiting.size());
  d.text = absl::StrCat("ranks wait in different collectives: ", absl::StrJoin(groups, ", "),
                        "; a rank called another collective than its peers, or skipped one");
  return d;
}

// Where a rank is in the job's order: its step, then its stage (between steps after the last).
std::pair<int64_t, int32_t> Order(const StallInputs& in, const RankPosition& p) {
  return {p.step, p.stage < 0 ? static_cast<int32_t>(in.schema.size()) : p.stage};
}

// No rank in a sync stage. A trainer may wait for a collective inside a stage it declared
// compute (PyTorch's DDP waits for its all-reduce inside backward, and the stub learns only
// afterwards which part was the wait): so a few ranks behind the others, in an earlier stage or
// step, are stuck and the rest wait for them; everyone at the same place is a pause.
StallDecision NoneWaiting(const StallInputs& in, const Census& c) {
  std::map<std::pair<int64_t, int32_t>, std::vector<int32_t>> at;
  for (int32_t r : c.other) at[Order(in, in.ranks[r])].push_back(r);
  std::vector<int32_t> behind = at.begin()->second;
  if (at.size() > 1 && behind.size() * 2 <= c.other.size()) {
    std::vector<int32_t> rest;
    for (int32_t r : c.other) {
      if (Order(in, in.ranks[r]) != at.begin()->first) rest.push_back(r);
    }
    return Stuck(in, behind, rest,
                 absl::StrCat("; ", rest.size(), rest.size() == 1 ? " rank" : " ranks",
                              " further on wait for ", behind.size() == 1 ? "it" : "them", " (in ",
                              Where(in.schema, in.ranks[rest[0]]), ")"));
  }
  StallDecision d = Begin(StallKind::kGroupWidePause, false);
  d.alarm = in.since_progress_ns >= in.pause_alarm_after_ns;
  const RankPosition& p = in.ranks[c.other[0]];
  bool same = true;
  for (int32_t r : c.other) {
    same = same && in.ranks[r].stage == p.stage && in.ranks[r].step == p.step;
  }
  d.text = absl::StrCat(
      same ? absl::StrCat("every rank in ", Where(in.schema, p)) : "no rank waits in a sync stage",
      " for ", FormatSeconds(static_cast<double>(in.since_progress_ns)),
      ": a group-wide pause (a checkpoint, an evaluation)",
      d.alarm ? absl::StrCat(", longer than ",
                             FormatSeconds(static_cast<double>(in.pause_alarm_after_ns)))
              : "");
  return d;
}

StallDecision Hung(const StallInputs& in, const Census& c) {
  int64_t front = -1;
  for (int32_t r : c.waiting) front = std::max(front, in.ranks[r].step);
  std::vector<int32_t> stuck, waiting;
  for (int32_t r : c.known) {
    // c.waiting is in rank order.
    const bool waits = std::binary_search(c.waiting.begin(), c.waiting.end(), r);
    (waits && in.ranks[r].step >= front ? waiting : stuck).push_back(r);
  }
  return Stuck(in, stuck, waiting, WaitingTail(in, waiting));
}

}  // namespace

const char* StallKindName(StallKind kind) {
  switch (kind) {
    case StallKind::kNone:
      return "";
    case StallKind::kHung:
      return "hung";
    case StallKind::kDead:
      return "dead";
    case StallKind::kDesync:
      return "desync";
    case StallKind::kCollective:
      return "collective";
    case StallKind::kGroupWidePause:
      return "group_wide_pause";
    case StallKind::kSidecarLost:
      return "sidecar_lost";
    case StallKind::kUnknown:
      return "unknown";
  }
  return "unknown";
}

StallDecision DecideStall(const StallInputs& in) {
  if (in.since_progress_ns < in.stall_after_ns) return {};
  const Census c = Count(in);
  if (c.active.empty()) return {};  // every rank ended: a finished job, not a stall
  if (!c.dead.empty()) return Dead(in, c);
  if (c.known.empty()) {
    StallDecision d;
    const std::string since = FormatSeconds(static_cast<double>(in.since_progress_ns));
    if (!c.lost.empty()) {
      d.kind = StallKind::kSidecarLost;
      Name(c.lost, "lost", &d);
      const std::string_view node = in.ranks[c.lost[0]].node;
      d.text = absl::StrCat("no word from the sidecar",
                            node.empty() ? "" : absl::StrCat(" of node ", std::string(node)),
                            " for ", since, ": ", RankList(c.lost),
                            " not heard from; the job may be running (the monitoring stopped, "
                            "not the job)");
      return d;
    }
    // Nothing heard since this process started (a coordinator restarted after the job ended):
    // nothing to say, and no alarm.
    if (!c.heard) return {};
    d.kind = StallKind::kUnknown;
    d.alarm = true;
    d.text = absl::StrCat("no progress for ", since,
                          "; the stubs do not say where they are (a build from before the open "
                          "stage was published)");
    return d;
  }
  if (c.waiting.empty()) return NoneWaiting(in, c);
  if (c.other.empty()) return AllWaiting(in, c);
  return Hung(in, c);
}

}  // namespace stagefrontier
