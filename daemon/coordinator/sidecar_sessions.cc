#include "daemon/coordinator/sidecar_sessions.h"

#include <vector>

namespace stagefrontier {

bool SidecarSessions::Session::Write(const v1::CoordinatorMessage& msg) {
  std::lock_guard<std::mutex> lock(mu);
  return writer != nullptr && writer->Send(msg);
}

std::shared_ptr<SidecarSessions::Session> SidecarSessions::Add(std::string node,
                                                               SessionWriter* writer) {
  auto s = std::make_shared<Session>();
  s->node = std::move(node);
  s->writer = writer;
  std::lock_guard<std::mutex> lock(mu_);
  s->id = next_id_++;
  sessions_[s->id] = s;
  return s;
}

void SidecarSessions::Remove(const std::shared_ptr<Session>& session) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_.erase(session->id);
    for (auto it = by_rank_.begin(); it != by_rank_.end();) {
      auto held = it->second.lock();
      it = (!held || held == session) ? by_rank_.erase(it) : std::next(it);
    }
  }
  std::lock_guard<std::mutex> lock(session->mu);
  session->writer = nullptr;
}

bool SidecarSessions::Bind(const std::shared_ptr<Session>& session, const std::string& job,
                           int32_t rank) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = by_rank_[{job, rank}];
  if (slot.lock() == session) return false;
  slot = session;
  return true;
}

int SidecarSessions::Send(const v1::ControlRequest& request) {
  std::vector<std::shared_ptr<Session>> targets;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

}  // namespace stagefrontier
