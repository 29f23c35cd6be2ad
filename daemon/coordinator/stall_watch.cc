#include "daemon/coordinator/stall_watch.h"

#include <algorithm>
#include <utility>

#include "shm/record_limits.h"

namespace stagefrontier {
namespace {

constexpr size_t kStepTimesKept = 64;
constexpr int64_t kMaxAgeNs = 86'400'000'000'000;  // a day
// A stage open this long is a stall forming (the sidecar's --open-stage-report-ms default);
// a sidecar reports such a stage every second while it stays open, so a report older than
// kFreshNs no longer says where the rank is.
constexpr int64_t kFormingNs = 1'000'000'000;
constexpr int64_t kFreshNs = 2'500'000'000;

}  // namespace

StallWatch::StallWatch(const StageSchema* schema, int32_t world_size, StallOptions options)
    : schema_(schema), options_(options), positions_(static_cast<size_t>(world_size)) {}

void StallWatch::NoteAlive(int32_t rank, int64_t now_ns, uint64_t source) {
  if (rank < 0 || static_cast<size_t>(rank) >= positions_.size()) return;
  Position& p = positions_[static_cast<size_t>(rank)];
  p.alive_ns = now_ns;
  p.source = source;
  p.source_gone = false;
}

void StallWatch::SourceGone(int32_t rank, uint64_t source) {
  if (rank < 0 || static_cast<size_t>(rank) >= positions_.size()) return;
  Position& p = positions_[static_cast<size_t>(rank)];
  if (p.source == source) p.source_gone = true;
}

void StallWatch::NotePosition(int32_t rank, const v1::SlotHealth& health, const std::string& node,
                              int64_t now_ns, uint64_t source) {
  if (rank < 0 || static_cast<size_t>(rank) >= positions_.size()) return;
  NoteAlive(rank, now_ns, source);
  Position& p = positions_[static_cast<size_t>(rank)];
  p.node = node;
  // A dead owner whose open stage is not reported: keep the last one seen, and its age.
  if (!health.open_known() && health.owner() == "dead" && p.seen_ns != 0) return;
  p.seen_ns = now_ns;
  p.known = health.open_known();
  if (!p.known) return;
  // The slot's bytes are the trainer's: a step outside [0, 2^40) is not a position, an age is
  // at most a day (no overflow when it is brought up to now).
  if (!shm::ValidStepNumber(health.open_step())) {
    p.known = false;
    return;
  }
  p.step = health.open_step();
  p.age_ns = std::clamp<int64_t>(health.open_age_ns(), 0, kMaxAgeNs);
  p.stage = -1;
  if (!health.open_stage().empty()) {
    // A stage this job does not have (another owner's schema): not a known position.
    const std::optional<size_t> k = schema_->Find(health.open_stage());
    if (!k) p.known = false;
    p.stage = k ? static_cast<int32_t>(*k) : -1;
  }
}

void StallWatch::NoteStepTime(int64_t exposed_ns) {
  step_ns_.push_back(exposed_ns);
  while (step_ns_.size() > kStepTimesKept) step_ns_.pop_front();
}

int64_t StallWatch::LimitNs() const {
  if (options_.fixed_ns > 0) return options_.fixed_ns;
  if (step_ns_.empty()) return options_.floor_ns;
  std::vector<int64_t> sorted(step_ns_.begin(), step_ns_.end());
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  return std::max(options_.floor_ns, 10 * sorted[sorted.size() / 2]);
}

int64_t StallWatch::OpenNs(const Position& p, int64_t now_ns) const {
  return p.age_ns + std::clamp<int64_t>(now_ns - p.seen_ns, 0, kMaxAgeNs);
}

void StallWatch::FillRank(int32_t rank, int64_t now_ns, v1::RankHealth* out) const {
  if (rank < 0 || static_cast<size_t>(rank) >= positions_.size()) return;
  const Position& p = positions_[static_cast<size_t>(rank)];
  if (!p.known || p.seen_ns == 0) return;
  out->set_open_known(true);
  out->set_open_step(p.step);
  out->set_open_stage(p.stage >= 0 ? schema_->stage(static_cast<size_t>(p.stage)).name : "");
  out->set_open_age_ns(OpenNs(p, now_ns));
}

void StallWatch::Restore(const v1::Stall& stall) {
  open_ = !stall.ended();
  restored_ = open_;
  stall_ = stall;
  progress_step_ = std::max(progress_step_, stall.frontier_step());
}

bool StallWatch::SameStall(const v1::Stall& a, const v1::Stall& b) {
  if (a.reason() != b.reason() || a.alarm() != b.alarm() || a.ranks_size() != b.ranks_size()) {
    return false;
  }
  // As sets: ranks stuck at the same moment swap places as their ages jitter.
  auto named = [](const v1::Stall& s) {
    std::vector<std::pair<int32_t, std::string>> out;
    for (const v1::StuckRank& r : s.ranks()) out.emplace_back(r.rank(), r.role());
    std::sort(out.begin(), out.end());
    return out;
  };
  return named(a) == named(b);
}

std::optional<v1::Stall> StallWatch::Close(int64_t wall_ns) {
  if (!open_) return std::nullopt;
  open_ = false;
  restored_ = false;
  stall_.set_ended(true);
  stall_.set_stalled_ns(std::max<int64_t>(0, wall_ns - stall_.started_unix_ns()));
  return stall_;
}

bool StallWatch::Forming(const Position& p, const RankPosition& at, int64_t now_ns,
                         int64_t since) const {
  // Silence is no sign: a sidecar is quiet while it holds a batch. A stuck rank's stage opened
  // before the job last advanced (its sidecar sent what it held then): open for about as long
  // as the job has not advanced, reported in the last seconds. A healthy rank caught with a
  // stage open past 1 s (a hiccup) is reported once or twice, not for as long as the job
  // seems not to advance.
  if (p.source_gone || at.process_gone || at.raised) return true;
  return at.known && now_ns - p.seen_ns <= kFreshNs &&
         at.open_ns >= std::max(kFormingNs, since - kFormingNs);
}

v1::Stall StallWatch::ToProto(const StallDecision& d, const std::vector<RankPosition>& at,
                              int64_t since, int64_t limit, int64_t wall_ns) const {
  v1::Stall s;
  s.set_reason(StallKindName(d.kind));
  s.set_alarm(d.alarm);
  for (const NamedRank& n : d.named) {
    const RankPosition& p = at[static_cast<size_t>(n.rank)];
    v1::StuckRank* r = s.add_ranks();
    r->set_rank(n.rank);
    r->set_node(std::string(p.node));
    r->set_step(p.step);
    r->set_stage(p.stage >= 0 ? schema_->stage(static_cast<size_t>(p.stage)).name : "");
    r->set_open_ns(p.open_ns);
    r->set_role(n.role);
  }
  s.set_frontier_step(progress_step_);
  s.set_stalled_ns(since);
  s.set_stall_after_ns(limit);
  s.set_text(d.text);
  s.set_started_unix_ns(wall_ns - since);
  return s;
}

std::optional<v1::Stall> StallWatch::Check(int64_t now_ns, int64_t newest_step,
                                           std::span<const RankLiveness> liveness, bool paused,
                                           int64_t wall_ns) {
  if (progress_ns_ == 0 || paused) {
    // The first look or a pause: the clock starts over. A restored stall stays open unless
    // the job went on past it meanwhile.
    if (newest_step > progress_step_) restored_ = false;
    progress_step_ = std::max(progress_step_, newest_step);
    progress_ns_ = now_ns;
  } else if (newest_step > progress_step_) {
    restored_ = false;
    progress_step_ = newest_step;
    progress_ns_ = now_ns;
  }
  const int64_t since = now_ns - progress_ns_;
  if (restored_ && restored_ns_ == 0) restored_ns_ = now_ns;
  bool heard = false;
  bool all_finished = !liveness.empty();
  for (const RankLiveness& l : liveness) all_finished = all_finished && l.finished;
  StallDecision d;
  int64_t limit = LimitNs();
  bool forming = false;
  std::vector<RankPosition> at(positions_.size());
  if (progress_step_ >= 0) {  // a job that never ran a step is starting, not stalled
    for (size_t r = 0; r < positions_.size(); ++r) {
      const Position& p = positions_[r];
      RankPosition& a = at[r];
      a.heard = p.seen_ns != 0;
      a.known = p.known && p.seen_ns != 0;
      heard = heard || a.heard;
      a.step = p.step;
      a.stage = p.stage;
      a.open_ns = OpenNs(p, now_ns);
      a.node = p.node;
      a.sidecar_lost =
          p.seen_ns != 0 && (p.source_gone || now_ns - p.alive_ns > options_.silent_ns);
      if (r < liveness.size()) {
        a.finished = liveness[r].finished;
        a.process_gone = liveness[r].process_gone;
        a.raised = liveness[r].raised;
        a.raised_in_collective = liveness[r].raised_in_collective;
      }
      forming = forming || Forming(p, a, now_ns, since);
    }
    if (!forming) limit = std::max(limit, options_.held_ns);
    d = DecideStall({*schema_, at, since, limit, options_.pause_alarm_ns});
  }
  if (d.kind == StallKind::kNone) {
    // A restored stall holds (a hung job is still hung after the restart) until the job goes
    // on, its ranks all finish, a new decision replaces it, or nobody is heard from for the
    // pause limit (the job is gone: its alarm must not outlive it).
    const bool gone = !heard && now_ns - restored_ns_ > options_.pause_alarm_ns;
    if (restored_ && !all_finished && !gone) return std::nullopt;
    return Close(wall_ns);  // its duration: from the last progress before it to now
  }
  v1::Stall s = ToProto(d, at, since, limit, wall_ns);
  const bool changed = !open_ || !SameStall(s, stall_);
  if (open_) s.set_started_unix_ns(stall_.started_unix_ns());
  open_ = true;
  restored_ = false;
  stall_ = std::move(s);
  if (!changed) return std::nullopt;
  return stall_;
}

}  // namespace stagefrontier
