#include "daemon/coordinator/stall_watch.h"

#include <algorithm>

namespace stagefrontier {
namespace {

constexpr size_t kStepTimesKept = 64;

}  // namespace

StallWatch::StallWatch(const StageSchema* schema, int32_t world_size, StallOptions options)
    : schema_(schema), options_(options), positions_(static_cast<size_t>(world_size)) {}

void StallWatch::NotePosition(int32_t rank, const v1::SlotHealth& health, const std::string& node,
                              int64_t now_ns) {
  if (rank < 0 || static_cast<size_t>(rank) >= positions_.size()) return;
  Position& p = positions_[static_cast<size_t>(rank)];
  p.node = node;
  // A dead owner whose open stage is not reported: keep the last one seen, and its age.
  if (!health.open_known() && health.owner() == "dead" && p.seen_ns != 0) return;
  p.seen_ns = now_ns;
  p.known = health.open_known();
  if (!p.known) return;
  p.step = health.open_step();
  p.age_ns = std::max<int64_t>(0, health.open_age_ns());
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
  return p.age_ns + std::max<int64_t>(0, now_ns - p.seen_ns);
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
  for (int i = 0; i < a.ranks_size(); ++i) {
    if (a.ranks(i).rank() != b.ranks(i).rank() || a.ranks(i).role() != b.ranks(i).role()) {
      return false;
    }
  }
  return true;
}

v1::Stall StallWatch::ToProto(const StallDecision& d, const std::vector<RankPosition>& at,
                              int64_t since, int64_t wall_ns) const {
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
  s.set_stall_after_ns(LimitNs());
  s.set_text(d.text);
  s.set_started_unix_ns(wall_ns - since);
  return s;
}

std::optional<v1::Stall> StallWatch::Check(int64_t now_ns, int64_t newest_step,
                                           std::span<const RankLiveness> liveness, bool paused,
                                           int64_t wall_ns) {
  if (progress_ns_ == 0 || paused) {
    // The first look (a restored stall stays open) or a pause: the clock starts over.
    progress_step_ = std::max(progress_step_, newest_step);
    progress_ns_ = now_ns;
  } else if (newest_step > progress_step_) {
    restored_ = false;
    progress_step_ = newest_step;
    progress_ns_ = now_ns;
  }
  const int64_t since = now_ns - progress_ns_;
  StallDecision d;
  std::vector<RankPosition> at(positions_.size());
  if (progress_step_ >= 0) {  // a job that never ran a step is starting, not stalled
    for (size_t r = 0; r < positions_.size(); ++r) {
      const Position& p = positions_[r];
      RankPosition& a = at[r];
      a.known = p.known && p.seen_ns != 0;
      a.step = p.step;
      a.stage = p.stage;
      a.open_ns = OpenNs(p, now_ns);
      a.node = p.node;
      a.sidecar_lost = p.seen_ns != 0 && now_ns - p.seen_ns > options_.silent_ns;
      if (r < liveness.size()) {
        a.finished = liveness[r].finished;
        a.process_gone = liveness[r].process_gone;
      }
    }
    d = DecideStall({*schema_, at, since, LimitNs(), options_.pause_alarm_ns});
  }
  if (d.kind == StallKind::kNone) {
    if (!open_ || restored_) return std::nullopt;
    open_ = false;
    stall_.set_ended(true);
    // Its duration: from the last progress before it to the progress that ended it.
    stall_.set_stalled_ns(std::max<int64_t>(0, wall_ns - stall_.started_unix_ns()));
    return stall_;
  }
  v1::Stall s = ToProto(d, at, since, wall_ns);
  const bool changed = !open_ || !SameStall(s, stall_);
  if (open_) s.set_started_unix_ns(stall_.started_unix_ns());
  open_ = true;
  restored_ = false;
  stall_ = std::move(s);
  if (!changed) return std::nullopt;
  return stall_;
}

}  // namespace stagefrontier
