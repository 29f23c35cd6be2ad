#include "daemon/sidecar/batch_hold.h"

#include <algorithm>
#include <limits>

namespace stagefrontier {
namespace {

int64_t PowerOfTwoAtMost(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

void BatchHold::Note(const std::string& job, int32_t rank, int64_t last_step, int64_t now_ns) {
  Job& j = jobs_[job];
  Rank& r = j.ranks[rank];
  if (last_step > r.last_step && r.last_step >= 0) {
    // The time between two drains of this rank over the steps they brought: the job's step time
    // as seen here (drains come every 1-10 ms, so this is close for steps of 10 ms and more).
    const int64_t sample = (now_ns - r.last_advance_ns) / (last_step - r.last_step);
    j.step_ns = j.step_ns == 0 ? sample : (3 * j.step_ns + sample) / 4;
  }
  if (last_step != r.last_step) {
    // Numbers that go back are a new run of the job: start again from them.
    if (last_step < r.last_step) j.sent_through = std::min(j.sent_through, last_step - 1);
    r.last_step = last_step;
    r.last_advance_ns = now_ns;
  }
  j.pending = true;
  Refresh(j, now_ns);
}

void BatchHold::Refresh(Job& job, int64_t now_ns) const {
  int64_t complete = std::numeric_limits<int64_t>::max();
  int64_t newest = -1;
  int64_t active = 0;
  for (const auto& [rank, r] : job.ranks) {
    newest = std::max(newest, r.last_step);
    if (now_ns - r.last_advance_ns > options_.rank_idle_ns) continue;
    ++active;
    complete = std::min(complete, r.last_step);
  }
  job.complete = active > 0 ? complete : newest;
  const int64_t k = options_.records_per_message / std::max<int64_t>(active, 1);
  job.steps_per_message =
      PowerOfTwoAtMost(std::clamp<int64_t>(k, 1, options_.max_steps_per_message));
}

bool BatchHold::JobDue(const Job& job) const {
  // Whether a batch boundary (a step s with (s + 1) % K == 0) lies in (sent_through, complete].
  const int64_t k = job.steps_per_message;
  return job.complete > job.sent_through && (job.complete + 1) / k > (job.sent_through + 1) / k;
}

bool BatchHold::Due(int64_t now_ns, int64_t oldest_ns) const {
  for (const auto& [name, job] : jobs_) {
    if (job.pending && JobDue(job)) return true;
  }
  return now_ns - oldest_ns >= HoldNs();
}

void BatchHold::Sent(int64_t now_ns) {
  for (auto& [name, job] : jobs_) {
    job.sent_through = job.complete;
    job.pending = false;
  }
  if (now_ns - last_gc_ns_ < options_.forget_after_ns) return;
  last_gc_ns_ = now_ns;
  for (auto& [name, job] : jobs_) {
    std::erase_if(job.ranks, [&](const auto& kv) {
      return now_ns - kv.second.last_advance_ns > options_.forget_after_ns;
    });
  }
  std::erase_if(jobs_, [](const auto& kv) { return kv.second.ranks.empty(); });
}

int64_t BatchHold::StepsPerMessage(const std::string& job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : it->second.steps_per_message;
}

int64_t BatchHold::HoldNs() const {
  int64_t hold = options_.max_hold_ns;
  for (const auto& [name, job] : jobs_) {
    if (!job.pending || job.step_ns <= 0) continue;
    hold = std::min(hold, (job.steps_per_message + 1) * job.step_ns);
  }
  return hold;
}

}  // namespace stagefrontier
