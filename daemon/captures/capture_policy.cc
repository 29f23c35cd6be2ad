#include "daemon/captures/capture_policy.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace stagefrontier {
namespace {

constexpr int64_t kHourNs = 3'600'000'000'000;

absl::Status Bad(const char* field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("capture policy: ", field, " ", what));
}

// `count` of `from`, spread evenly.
std::vector<int32_t> Spread(const std::vector<int32_t>& from, size_t count) {
  std::vector<int32_t> out;
  if (from.empty() || count == 0) return out;
  count = std::min(count, from.size());
  for (size_t i = 0; i < count; ++i) out.push_back(from[(2 * i + 1) * from.size() / (2 * count)]);
  return out;
}

}  // namespace

std::string ReasonKind(const std::string& reason) { return reason.substr(0, reason.find(':')); }

absl::Status CapturePolicyOptions::Validate() const {
  if (references < 0 || references > 64) return Bad("references", "must be in [0, 64]");
  if (max_suspects < 1 || max_suspects > 64) return Bad("max_suspects", "must be in [1, 64]");
  if (steps < 1 || steps > 100) return Bad("steps", "must be in [1, 100]");
  if (min_lead_steps < 1 || min_lead_steps > 100'000) {
    return Bad("min_lead_steps", "must be in [1, 100000]");
  }
  if (!(delivery_seconds >= 0 && delivery_seconds <= 3600)) {
    return Bad("delivery_seconds", "must be in [0, 3600]");
  }
  if (cooldown_windows < 0 || cooldown_windows > 1'000'000) {
    return Bad("cooldown_windows", "must be in [0, 1000000]");
  }
  if (max_per_hour < 1 || max_per_hour > 3600) return Bad("max_per_hour", "must be in [1, 3600]");
  if (!(finish_timeout_seconds > 0 && finish_timeout_seconds <= 86'400)) {
    return Bad("finish_timeout_seconds", "must be in (0, 86400]");
  }
  if (decisions_kept < 1 || decisions_kept > 100'000) {
    return Bad("decisions_kept", "must be in [1, 100000]");
  }
  return absl::OkStatus();
}

std::vector<int32_t> CaptureDecision::ranks() const {
  std::vector<int32_t> out = suspects;
  out.insert(out.end(), references.begin(), references.end());
  return out;
}

std::vector<int32_t> PickReferences(const std::vector<int32_t>& suspects,
                                    const CaptureJobFacts& facts, int32_t count) {
  const std::set<int32_t> suspect_set(suspects.begin(), suspects.end());
  std::set<std::string> suspect_nodes;
  for (int32_t r : suspects) {
    auto it = facts.node_of_rank.find(r);
    if (it != facts.node_of_rank.end()) suspect_nodes.insert(it->second);
  }
  std::vector<int32_t> elsewhere, beside;
  for (int32_t r : facts.ranks) {
    if (suspect_set.count(r) || facts.cannot_capture.count(r)) continue;
    auto it = facts.node_of_rank.find(r);
    const bool same_node = it != facts.node_of_rank.end() && suspect_nodes.count(it->second);
    (same_node ? beside : elsewhere).push_back(r);
  }
  std::vector<int32_t> out = Spread(elsewhere, static_cast<size_t>(std::max(0, count)));
  if (static_cast<int32_t>(out.size()) < count) {
    std::vector<int32_t> more = Spread(beside, static_cast<size_t>(count) - out.size());
    out.insert(out.end(), more.begin(), more.end());
    std::sort(out.begin(), out.end());
  }
  return out;
}

int64_t CapturePolicy::FirstStep(const CaptureJobFacts& facts) const {
  const double by_rate =
      std::ceil(options_.delivery_seconds * std::max(0.0, facts.steps_per_second));
  const int64_t lead =
      std::max<int64_t>(options_.min_lead_steps, static_cast<int64_t>(std::min(by_rate, 1e9)));
  return facts.newest_step + lead + 1;
}

void CapturePolicy::Expire(JobBook& book, const CaptureJobFacts& facts, int64_t now_ns) const {
  if (book.in_flight == 0) return;
  // Its steps are long past (by step count when the rate is known, else by time alone).
  const bool steps_past =
      facts.steps_per_second <= 0 || facts.newest_step > book.in_flight_deadline_step;
  if (steps_past && now_ns - book.in_flight_since_ns >
                        static_cast<int64_t>(options_.finish_timeout_seconds * 1e9)) {
    book.in_flight = 0;
  }
}

CaptureDecision CapturePolicy::Keep(JobBook& book, CaptureDecision d) {
  // Repeated skips of one kind (every HEALTHY window, each window of a cooldown) are one
  // entry, updated.
  if (!d.asked && !book.decisions.empty() && !book.decisions.back().asked &&
      ReasonKind(book.decisions.back().reason) == ReasonKind(d.reason)) {
    book.decisions.back() = d;
    return d;
  }
  book.decisions.push_back(d);
  while (book.decisions.size() > options_.decisions_kept) book.decisions.pop_front();
  return d;
}

CaptureDecision CapturePolicy::OnVerdict(const std::string& job, const Verdict& verdict,
                                         const CaptureJobFacts& facts, int64_t now_ns) {
  JobBook& book = jobs_[job];
  Expire(book, facts, now_ns);
  if (book.windows_since_capture >= 0) ++book.windows_since_capture;
  CaptureDecision d;
  d.decided_ns = now_ns;
  d.verdict_last_step = verdict.last_step;
  auto skip = [&](std::string reason) {
    d.reason = std::move(reason);
    return Keep(book, d);
  };
  const bool wanted = (verdict.label == VerdictLabel::kClear && options_.on_clear) ||
                      (verdict.label == VerdictLabel::kAmbiguous && options_.on_ambiguous) ||
                      (verdict.label == VerdictLabel::kHealthy && options_.on_healthy);
  if (!wanted) return skip(absl::StrCat(LabelText(verdict), ": not captured (policy)"));
  if (verdict.group_wide) return skip("group-wide: no rank-targeted capture");
  if (!verdict.unreliable.empty()) {
    return skip(absl::StrCat("verdict unreliable (", absl::StrJoin(verdict.unreliable, ", "),
                             "): not captured"));
  }
  std::vector<int32_t> suspects = verdict.candidate_ranks;
  if (suspects.empty() && !verdict.suspects.empty()) suspects = {verdict.suspects[0].rank};
  if (suspects.empty()) return skip("no rank named");
  // A rank whose trainer has no capture handler would lose steps of evidence for no trace.
  std::vector<int32_t> unable;
  std::erase_if(suspects, [&](int32_t r) {
    if (!facts.cannot_capture.count(r)) return false;
    unable.push_back(r);
    return true;
  });
  if (suspects.empty()) {
    return skip(absl::StrCat("cannot capture: no capture handler in the trainer of rank",
                             unable.size() == 1 ? " " : "s ", absl::StrJoin(unable, ", "),
                             " (stagefrontier.torch, or C/C++ callbacks)"));
  }
  std::string capped;
  if (static_cast<int32_t>(suspects.size()) > options_.max_suspects) {
    capped = absl::StrCat(" (", options_.max_suspects, " of ", suspects.size(), " candidates)");
    suspects.resize(static_cast<size_t>(options_.max_suspects));
  }
  if (book.in_flight != 0) return skip(absl::StrCat("capture ", book.in_flight, " in flight"));
  if (book.windows_since_capture >= 0 && book.windows_since_capture < options_.cooldown_windows) {
    return skip(absl::StrCat("cooldown: ", book.windows_since_capture, " of ",
                             options_.cooldown_windows, " windows since the last capture"));
  }
  while (!book.asked_ns.empty() && now_ns - book.asked_ns.front() >= kHourNs) {
    book.asked_ns.pop_front();
  }
  if (static_cast<int32_t>(book.asked_ns.size()) >= options_.max_per_hour) {
    return skip(absl::StrCat("hourly cap: ", options_.max_per_hour, " captures in the last hour"));
  }
  if (facts.newest_step < 0) return skip("no step accounted yet");
  d.references = PickReferences(suspects, facts, options_.references);
  if (options_.references > 0 && d.references.empty()) {
    return skip(facts.cannot_capture.empty()
                    ? "no rank to compare with: every rank is a suspect"
                    : "no rank to compare with: every other rank is a suspect or cannot capture");
  }
  d.suspects = std::move(suspects);
  if (!verdict.suspects.empty() && verdict.suspects[0].stage >= 0 &&
      static_cast<size_t>(verdict.suspects[0].stage) < facts.stage_names.size()) {
    d.stage = facts.stage_names[static_cast<size_t>(verdict.suspects[0].stage)];
  }
  d.asked = true;
  d.id = next_id_++;
  d.first_step = FirstStep(facts);
  d.steps = options_.steps;
  d.reason = absl::StrCat(LabelText(verdict), " on rank", d.suspects.size() == 1 ? " " : "s ",
                          absl::StrJoin(d.suspects, ", "), capped, ": steps ", d.first_step, "..",
                          d.first_step + d.steps - 1, ", references ",
                          d.references.empty() ? "none" : absl::StrJoin(d.references, ", "));
  book.in_flight = d.id;
  book.in_flight_since_ns = now_ns;
  book.in_flight_deadline_step = d.first_step + d.steps;
  book.windows_since_capture = 0;
  book.asked_ns.push_back(now_ns);
  return Keep(book, d);
}

absl::StatusOr<CaptureDecision> CapturePolicy::Manual(const std::string& job,
                                                      const std::vector<int32_t>& ranks,
                                                      int32_t steps, const CaptureJobFacts& facts,
                                                      int64_t now_ns) {
  if (ranks.empty()) return absl::InvalidArgumentError("a capture needs at least one rank");
  if (steps < 1 || steps > 100) {
    return absl::InvalidArgumentError(absl::StrCat("steps ", steps, " is outside [1, 100]"));
  }
  const std::set<int32_t> known(facts.ranks.begin(), facts.ranks.end());
  for (int32_t r : ranks) {
    if (!known.count(r)) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", r, " is not a rank of job ", job));
    }
  }
  if (facts.newest_step < 0) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job, " has no step accounted yet"));
  }
  JobBook& book = jobs_[job];
  Expire(book, facts, now_ns);
  if (book.in_flight != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("capture ", book.in_flight, " of job ", job, " is in flight"));
  }
  CaptureDecision d;
  d.manual = true;
  d.asked = true;
  d.id = next_id_++;
  d.suspects = ranks;
  std::sort(d.suspects.begin(), d.suspects.end());
  d.suspects.erase(std::unique(d.suspects.begin(), d.suspects.end()), d.suspects.end());
  d.first_step = FirstStep(facts);
  d.steps = steps;
  d.decided_ns = now_ns;
  d.reason = absl::StrCat("asked by hand: ranks ", absl::StrJoin(d.suspects, ", "), ", steps ",
                          d.first_step, "..", d.first_step + steps - 1);
  // With the rank the newest verdict named among others: that rank against the rest.
  if (d.suspects.size() >= 2 && !facts.focus_stage.empty() &&
      std::binary_search(d.suspects.begin(), d.suspects.end(), facts.focus_rank)) {
    for (int32_t r : d.suspects) {
      if (r != facts.focus_rank) d.references.push_back(r);
    }
    d.suspects = {facts.focus_rank};
    d.stage = facts.focus_stage;
    absl::StrAppend(&d.reason, " (compared: rank ", facts.focus_rank, "'s ", d.stage,
                    ", as the last verdict named it)");
  }
  book.in_flight = d.id;
  book.in_flight_since_ns = now_ns;
  book.in_flight_deadline_step = d.first_step + steps;
  book.windows_since_capture = 0;
  return Keep(book, d);
}

CaptureDecision CapturePolicy::OnStall(const std::string& job, const CaptureStallFacts& stall,
                                       int64_t now_ns, int64_t wall_ns) {
  CaptureDecision d;
  d.kind = CaptureKind::kStacks;
  d.decided_ns = now_ns;
  d.decided_unix_ns = wall_ns;
  static const std::set<std::string> kAsked = {"hung", "dead", "desync", "collective"};
  if (stall.ended || !stall.alarm || !kAsked.count(stall.kind)) return d;
  JobBook& book = jobs_[job];
  if (book.stacks_for_stall == stall.started_unix_ns) return d;  // this stall was asked
  book.stacks_for_stall = stall.started_unix_ns;
  auto skip = [&](std::string reason) {
    d.reason = std::move(reason);
    return Keep(book, d);
  };
  constexpr int64_t kHourNs = 3'600'000'000'000;
  while (!book.stacks_asked_ns.empty() && now_ns - book.stacks_asked_ns.front() > kHourNs) {
    book.stacks_asked_ns.pop_front();
  }
  if (static_cast<int64_t>(book.stacks_asked_ns.size()) >= options_.max_stacks_per_hour) {
    return skip(absl::StrCat("stacks: ", book.stacks_asked_ns.size(),
                             " stack captures in the last hour (the cap)"));
  }
  // The stuck ranks, then one waiting rank (two in different places when nobody is stuck: a
  // desync).
  const CaptureStallFacts::Rank* first_waiting = nullptr;
  for (const CaptureStallFacts::Rank& r : stall.ranks) {
    if (r.role == "stuck" && d.suspects.size() < 2) {
      d.suspects.push_back(r.rank);
    } else if (r.role == "waiting") {
      const size_t want = d.suspects.empty() ? 2 : 1;
      // A desync's two: in different places; a collective's: any two (all wait in one).
      const bool other_place = first_waiting == nullptr || first_waiting->stage != r.stage ||
                               first_waiting->step != r.step || stall.kind == "collective";
      if (d.references.size() < want && other_place) {
        d.references.push_back(r.rank);
        if (first_waiting == nullptr) first_waiting = &r;
      }
    } else {
      continue;
    }
    const bool asked = std::count(d.suspects.begin(), d.suspects.end(), r.rank) > 0 ||
                       std::count(d.references.begin(), d.references.end(), r.rank) > 0;
    if (!asked) continue;
    d.notes[r.rank] = absl::StrCat(r.role, r.stage.empty() ? " between steps" : " in ", r.stage,
                                   " at step ", r.step, " for ", r.open_ns / 1'000'000'000, " s");
    if (d.first_step < 0 || r.role == "stuck") {
      d.first_step = r.step;
      d.stage = r.stage;
    }
  }
  if (d.suspects.empty() && d.references.empty()) {
    return skip(absl::StrCat("stacks: the stall (", stall.kind, ") names no live rank to ask"));
  }
  d.asked = true;
  d.id = next_id_++;
  book.stacks_asked_ns.push_back(now_ns);
  d.reason = absl::StrCat("stacks at the stall (", stall.kind, "): ", stall.text);
  return Keep(book, d);
}

void CapturePolicy::OnCaptureFinished(const std::string& job, uint64_t id, int64_t) {
  auto it = jobs_.find(job);
  if (it != jobs_.end() && it->second.in_flight == id) it->second.in_flight = 0;
}

void CapturePolicy::OnCaptureMissed(const std::string& job, uint64_t id, const std::string& why,
                                    int64_t now_ns) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  for (CaptureDecision& d : it->second.decisions) {
    if (d.asked && d.id == id && d.missed.empty()) d.missed = why;
  }
  OnCaptureFinished(job, id, now_ns);
}

std::vector<CaptureDecision> CapturePolicy::Decisions(const std::string& job) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return {};
  return {it->second.decisions.begin(), it->second.decisions.end()};
}

}  // namespace stagefrontier
