#include "daemon/coordinator/sidecar_sessions.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/log_safe.h"

namespace stagefrontier {

bool SidecarSessions::Session::Write(const v1::CoordinatorMessage& msg) {
  MutexLock lock(&mu);
  return writer != nullptr && writer->Send(msg);
}

absl::StatusOr<std::shared_ptr<SidecarSessions::Session>> SidecarSessions::Add(
    std::string node, std::string sidecar_id, std::string address, SessionWriter* writer,
    int64_t now_ns) {
  MutexLock lock(&mu_);
  if (!node.empty()) {
    Holder& h = holders_[node];
    const auto held_by_another = [&] {
      return h.streams > 0 && (h.sidecar_id != sidecar_id || h.address != address);
    };
    if (held_by_another()) {
      // Is the holder alive? Silent streams are those of a machine that went away.
      int64_t newest = 0;
      for (const auto& [id, s] : sessions_) {
        if (s->node != node) continue;
        newest = std::max(newest, s->last_seen_ns.load(std::memory_order_relaxed));
      }
      if (now_ns - newest >= stale_after_ns_) h.streams = 0;  // its Removes will not count
    }
    if (held_by_another()) {
      ++conflicts_;
      const std::string what =
          absl::StrCat("sidecar ", LogSafe(sidecar_id), " from ", LogSafe(address),
                       " claimed node ", LogSafe(node), " while sidecar ", LogSafe(h.sidecar_id),
                       " from ", LogSafe(h.address), " is connected under it");
      conflicted_[node] = Conflict{std::chrono::steady_clock::now(), what};
      return absl::AlreadyExistsError(
          absl::StrCat(what,
                       ": refused (one sidecar per node name; a restarted sidecar is "
                       "accepted once the old one's streams have ended)"));
    }
    if (h.streams == 0) h = Holder{sidecar_id, address, 0};
    ++h.streams;
  }
  auto s = std::make_shared<Session>(writer);
  s->node = std::move(node);
  s->sidecar_id = std::move(sidecar_id);
  s->last_seen_ns.store(now_ns, std::memory_order_relaxed);
  s->id = next_id_++;
  sessions_[s->id] = s;
  return s;
}

std::string SidecarSessions::InConflict(const std::string& node) const {
  MutexLock lock(&mu_);
  auto it = conflicted_.find(node);
  if (it == conflicted_.end() ||
      std::chrono::steady_clock::now() - it->second.at > std::chrono::hours(1)) {
    return "";
  }
  return it->second.what;
}

uint64_t SidecarSessions::conflicts() const {
  MutexLock lock(&mu_);
  return conflicts_;
}

void SidecarSessions::Remove(const std::shared_ptr<Session>& session) {
  {
    MutexLock lock(&mu_);
    if (sessions_.erase(session->id) > 0 && !session->node.empty()) {
      // Only the holder's own streams count (a silent holder's, replaced, do not).
      auto h = holders_.find(session->node);
      if (h != holders_.end() && h->second.sidecar_id == session->sidecar_id &&
          --h->second.streams <= 0) {
        holders_.erase(h);
      }
    }
    if (auto b = bound_.find(session->id); b != bound_.end()) {
      for (const auto& [job, ranks] : b->second) {
        for (int32_t rank : ranks) UnbindLocked(session, job, rank);
      }
      bound_.erase(b);
    }
  }
  MutexLock lock(&session->mu);
  session->writer = nullptr;
}

bool SidecarSessions::Bind(const std::shared_ptr<Session>& session, const std::string& job,
                           int32_t rank) {
  MutexLock lock(&mu_);
  auto& slot = by_rank_[{job, rank}];
  const std::shared_ptr<Session> previous = slot.lock();
  if (previous == session) return false;
  if (previous != nullptr) {
    // The rank moved to another stream (a restarted sidecar): no longer the old one's.
    if (auto b = bound_.find(previous->id); b != bound_.end()) {
      if (auto j = b->second.find(job); j != b->second.end()) j->second.erase(rank);
    }
  }
  slot = session;
  bound_[session->id][job].insert(rank);
  return true;
}

void SidecarSessions::UnbindLocked(const std::shared_ptr<Session>& session, const std::string& job,
                                   int32_t rank) {
  ++slot_visits_;
  auto it = by_rank_.find({job, rank});
  if (it == by_rank_.end()) return;
  const std::shared_ptr<Session> held = it->second.lock();
  if (held == nullptr || held == session) by_rank_.erase(it);
}

void SidecarSessions::Forget(const std::shared_ptr<Session>& session, const std::string& job) {
  MutexLock lock(&mu_);
  auto b = bound_.find(session->id);
  if (b == bound_.end()) return;
  auto j = b->second.find(job);
  if (j == b->second.end()) return;
  for (int32_t rank : j->second) UnbindLocked(session, job, rank);
  b->second.erase(j);
  if (b->second.empty()) bound_.erase(b);
}

int64_t SidecarSessions::slot_visits() const {
  MutexLock lock(&mu_);
  return slot_visits_;
}

int SidecarSessions::Send(const v1::ControlRequest& request) {
  std::vector<std::shared_ptr<Session>> targets;
  {
    MutexLock lock(&mu_);
    if (request.rank() >= 0) {
      auto it = by_rank_.find({request.job(), request.rank()});
      if (it != by_rank_.end()) {
        if (auto s = it->second.lock()) targets.push_back(std::move(s));
      }
    } else {
      std::set<uint64_t> seen;
      for (auto it = by_rank_.lower_bound({request.job(), INT32_MIN});
           it != by_rank_.end() && it->first.first == request.job(); ++it) {
        if (auto s = it->second.lock(); s && seen.insert(s->id).second) targets.push_back(s);
      }
    }
  }
  v1::CoordinatorMessage msg;
  *msg.mutable_control() = request;
  int reached = 0;
  for (const auto& s : targets) reached += s->Write(msg) ? 1 : 0;
  return reached;
}

size_t SidecarSessions::size() const {
  MutexLock lock(&mu_);
  return sessions_.size();
}

}  // namespace stagefrontier
