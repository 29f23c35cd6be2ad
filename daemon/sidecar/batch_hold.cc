#include "daemon/sidecar/batch_hold.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace stagefrontier {
namespace {

// A batch's last step must end this long before its hold runs out.
constexpr int64_t kBoundarySlackNs = 500'000'000;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kDayMs = 86'400'000;  // beyond any limit; keeps the products in range

// The coordinator's step deadline as the hold takes it: at most a day, 0 where it said none
// (an older coordinator) or a value that is no deadline (0 or negative).
int64_t TakenDeadlineMs(const v1::StreamLimits* limits) {
  if (limits == nullptr || limits->step_deadline_ms() <= 0) return 0;
  return std::min(limits->step_deadline_ms(), kDayMs);
}

int64_t SaturatingTimes(int64_t n, int64_t ns) {
  return ns > std::numeric_limits<int64_t>::max() / n ? std::numeric_limits<int64_t>::max()
                                                      : n * ns;
}

int64_t PowerOfTwoAtMost(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

void BatchHold::Note(const std::string& job, int32_t rank, int64_t last_step, int64_t now_ns) {
  last_now_ns_ = std::max(last_now_ns_, now_ns);
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
  const int64_t by_records = options_.records_per_message / std::max<int64_t>(active, 1);
  int64_t k = PowerOfTwoAtMost(std::clamp<int64_t>(by_records, 1, options_.max_steps_per_message));
  // What the coordinator sees of the job's progress comes with the batches: K steps must stay
  // well inside the stall limit, and a batch's K steps must end before its hold runs out (the
  // hold counts from the end of its first step: K - 1 steps, and half a second to spare).
  const int64_t step = job.step_ns;
  const int64_t stall_limit = std::max(options_.stall_after_ns, SaturatingTimes(10, step));
  const int64_t stall_room = stall_limit / 5 * 4;
  if (step > 0) {
    while (k > 1 && (SaturatingTimes(k, step) > stall_room ||
                     SaturatingTimes(k - 1, step) > options_.max_hold_ns - kBoundarySlackNs)) {
      k /= 2;
    }
  }
  job.steps_per_message = k;
  job.hold_ns = step > 0
                    ? std::min({options_.max_hold_ns, SaturatingTimes(k + 1, step), stall_room})
                    : options_.max_hold_ns;
}

bool BatchHold::JobDue(const Job& job) const {
  // Whether a batch boundary (a step s with (s + 1 + phase) % K == 0, or a window's last step)
  // lies in (sent_through, complete].
  if (job.complete <= job.sent_through) return false;
  const int64_t done = job.sent_through + 1;  // steps sent: [0, done)
  const int64_t k = job.steps_per_message;
  const int64_t w = std::max<int64_t>(options_.window_steps, 1);
  // The first step s >= done with (s + 1 + phase) % k == 0.
  const int64_t phase = static_cast<int64_t>(options_.phase_seed % static_cast<uint64_t>(k));
  const int64_t next_k = ((done + phase) / k + 1) * k - 1 - phase;
  const int64_t next_w = (done / w + 1) * w - 1;
  return job.complete >= std::min(next_k, next_w);
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
    if (job.pending) hold = std::min(hold, job.hold_ns);
  }
  return hold;
}

void BatchHold::set_options(const BatchHoldOptions& options) {
  options_ = options;
  for (auto& [name, job] : jobs_) Refresh(job, last_now_ns_);
}

uint64_t PhaseSeedFor(std::string_view node) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a, then a 64-bit finalizer for the low bits
  for (const char c : node) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

std::string DescribeHold(const v1::StreamLimits& limits, const BatchHoldOptions& hold) {
  const int64_t taken = TakenDeadlineMs(&limits);
  const std::string deadline = taken > 0 ? absl::StrCat(taken, " ms")
                                         : "5000 ms (it says no deadline: an older coordinator's)";
  return absl::StrCat("the coordinator closes a step ", deadline,
                      " after its first record: batches held at most ", hold.max_hold_ns / kMs,
                      " ms");
}

BatchHoldOptions HoldFor(const BatchHoldOptions& configured, const v1::StreamLimits* limits) {
  BatchHoldOptions out = configured;
  int64_t cap = 4'000 * kMs;  // under an older coordinator's 5 s step deadline
  if (const int64_t deadline_ms = TakenDeadlineMs(limits); deadline_ms > 0) {
    cap = (deadline_ms - std::min<int64_t>(1'000, deadline_ms / 2)) * kMs;
  }
  out.max_hold_ns = std::min(out.max_hold_ns, cap);
  if (limits != nullptr && limits->stall_after_ms() > 0) {
    out.stall_after_ns = std::min(limits->stall_after_ms(), kDayMs) * kMs;
  }
  if (limits != nullptr && limits->window_steps() > 0) {
    out.window_steps = std::min<int64_t>(limits->window_steps(), 1'000'000'000);
  }
  return out;
}

}  // namespace stagefrontier
