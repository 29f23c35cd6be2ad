#include "daemon/coordinator/self_tests.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/mutex.h"
#include "shm/control_channel.h"
#include "shm/segment_layout_v1.h"

namespace stagefrontier {
namespace {

constexpr int64_t kHourNs = 3'600'000'000'000;

bool Contains(const google::protobuf::RepeatedField<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
bool Contains(const google::protobuf::RepeatedPtrField<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Injected steps of [first, last] inside the window.
int64_t Overlap(const v1::Verdict& v, int64_t first, int64_t last) {
  return std::max<int64_t>(0, std::min(last, v.last_step()) - std::max(first, v.first_step()) + 1);
}

}  // namespace

std::string WindowLine(const v1::Verdict& v) {
  std::string what = v.label();
  if (!v.reason().empty()) absl::StrAppend(&what, " ", v.reason());
  if (v.group_wide()) {
    absl::StrAppend(&what, " (group-wide)");
  } else if (v.label() == "CLEAR" && !v.suspects().empty()) {
    absl::StrAppend(&what, " ", v.suspects(0).stage(), " rank ", v.suspects(0).rank());
  } else if (v.label() == "AMBIGUOUS") {
    absl::StrAppend(&what, " ranks ", absl::StrJoin(v.candidate_ranks(), ","), " stages ",
                    absl::StrJoin(v.candidate_stages(), ","));
  }
  return absl::StrCat(what, " (steps ", v.first_step(), "..", v.last_step(), ")");
}

absl::StatusOr<v1::ControlRequest> SelfTestBook::Start(const SelfTestJobFacts& job,
                                                       const v1::SelfTestCommand& command,
                                                       uint64_t id, int64_t now_ns) {
  if (command.rank() < 0 || command.rank() >= job.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", command.rank(), " is outside the job's world of ", job.world_size, " ranks"));
  }
  const auto stage = std::find(job.stages.begin(), job.stages.end(), command.stage());
  if (stage == job.stages.end()) {
    return absl::InvalidArgumentError(absl::StrCat("job ", job.job, " has no stage \"",
                                                   command.stage(), "\"; its stages are ",
                                                   absl::StrJoin(job.stages, ", ")));
  }
  if (command.delay_ms() < 1 || command.delay_ms() > limits_.max_delay_ms) {
    return absl::InvalidArgumentError(
        absl::StrCat("delay ", command.delay_ms(), " ms is outside 1..", limits_.max_delay_ms));
  }
  if (command.steps() < 1 || command.steps() > limits_.max_steps) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps ", command.steps(), " is outside 1..", limits_.max_steps));
  }
  if (job.newest_step < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.job, " has reported no step yet: start the self-test later"));
  }
  int64_t lead = command.lead_steps();
  if (lead == 0) {
    lead = limits_.min_lead_steps;
    if (job.step_ns > 0) lead = std::max(lead, (limits_.lead_ns + job.step_ns - 1) / job.step_ns);
  }
  MutexLock lock(&mu_);
  newest_step_[job.job] = job.newest_step;
  if (absl::Status s = CheckLoadLocked(job.job, command.steps(), now_ns); !s.ok()) return s;
  Test t;
  t.renewed_ns = now_ns;
  v1::SelfTestReport& r = t.report;
  r.set_id(id);
  r.set_rank(command.rank());
  r.set_stage(command.stage());
  r.set_delay_ms(command.delay_ms());
  r.set_first_step(job.newest_step + lead);
  r.set_last_step(r.first_step() + command.steps() - 1);
  t.started_ns = now_ns;
  const v1::ControlRequest req = Request(
      job.job, r, static_cast<uint32_t>(stage - job.stages.begin()), command.delay_ms() * 1000);
  std::vector<Test>& tests = tests_[job.job];
  tests.push_back(std::move(t));
  if (tests.size() > limits_.kept_per_job) tests.erase(tests.begin());
  return req;
}

void SelfTestBook::Forget(const std::string& job, uint64_t id) {
  MutexLock lock(&mu_);
  auto it = tests_.find(job);
  if (it == tests_.end()) return;
  std::erase_if(it->second, [&](const Test& t) { return t.report.id() == id; });
}

absl::Status SelfTestBook::CheckLoadLocked(const std::string& job, uint32_t steps,
                                           int64_t now_ns) const {
  if (const int n = RunningLocked(job); n >= limits_.max_running_per_job) {
    return absl::ResourceExhaustedError(
        absl::StrCat("job ", job, " has ", n, " self-test", n == 1 ? "" : "s",
                     " running already (at most ", limits_.max_running_per_job,
                     " at a time): wait for it, or cancel it with sfctl selftest --cancel ID"));
  }
  if (const int n = RunningLocked(""); n >= limits_.max_running) {
    return absl::ResourceExhaustedError(
        absl::StrCat(n, " self-tests are running on this coordinator already (at most ",
                     limits_.max_running, " at a time)"));
  }
  if (const int64_t hour_steps = StepsLastHourLocked(job, now_ns);
      hour_steps + steps > limits_.max_steps_per_hour) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "job ", job, " had ", hour_steps, " delayed steps asked in the last hour; ", steps,
        " more would pass its budget of ", limits_.max_steps_per_hour, " an hour"));
  }
  return absl::OkStatus();
}

int64_t SelfTestBook::StepsLastHourLocked(const std::string& job, int64_t now_ns) const {
  int64_t steps = 0;
  if (auto it = tests_.find(job); it != tests_.end()) {
    for (const Test& t : it->second) {
      if (now_ns - t.started_ns < kHourNs) steps += DelayedSteps(t);
    }
  }
  return steps;
}

int64_t SelfTestBook::DelayedSteps(const Test& t) {
  const int64_t last =
      t.cancelled.empty() ? t.report.last_step() : std::min(t.report.last_step(), t.cancel_step);
  return std::max<int64_t>(0, last - t.report.first_step() + 1);
}

bool SelfTestBook::Running(const Test& t, int64_t newest_step) {
  return t.cancelled.empty() && t.stub_state != shm::v1::kSelfTestNotAllowed &&
         t.stub_state != shm::v1::kSelfTestBadRequest && newest_step <= t.report.last_step();
}

int SelfTestBook::RunningLocked(const std::string& job) const {
  int n = 0;
  for (const auto& [name, tests] : tests_) {
    if (!job.empty() && name != job) continue;
    const auto newest = newest_step_.find(name);
    const int64_t step = newest != newest_step_.end() ? newest->second : -1;
    for (const Test& t : tests) n += Running(t, step) ? 1 : 0;
  }
  return n;
}

v1::ControlRequest SelfTestBook::Request(const std::string& job, const v1::SelfTestReport& r,
                                         uint32_t stage, uint32_t delay_us) {
  v1::ControlRequest req;
  req.set_request_id(r.id());
  req.set_job(job);
  req.set_rank(r.rank());
  req.set_trace_first_step(0);
  req.set_trace_last_step(-1);
  req.set_selftest_stage(stage);
  req.set_selftest_delay_us(delay_us);  // 0: the stub stops delaying (ingest.proto)
  req.set_selftest_first_step(r.first_step());
  req.set_selftest_last_step(r.last_step());
  req.set_sets(shm::kControlSetsSelfTest);  // a capture of the rank stays
  return req;
}

absl::StatusOr<v1::ControlRequest> SelfTestBook::Cancel(const std::string& job, uint64_t id,
                                                        int64_t newest_step,
                                                        const std::string& why) {
  MutexLock lock(&mu_);
  newest_step_[job] = newest_step;
  auto it = tests_.find(job);
  Test* t = nullptr;
  if (it != tests_.end()) {
    for (Test& x : it->second) {
      if (x.report.id() == id) t = &x;
    }
  }
  if (t == nullptr) return absl::NotFoundError(absl::StrCat("job ", job, " has no self-test ", id));
  if (!Running(*t, newest_step)) {
    return absl::FailedPreconditionError(
        absl::StrCat("self-test ", id, " of job ", job, " is not running"));
  }
  t->cancelled = why;
  t->cancel_step = newest_step;
  return Request(job, t->report, 0, 0);
}

std::vector<v1::ControlRequest> SelfTestBook::ExpireLeases(
    int64_t now_ns, const std::function<int64_t(const std::string& job)>& newest_step) {
  std::vector<v1::ControlRequest> out;
  MutexLock lock(&mu_);
  for (auto& [job, tests] : tests_) {
    const int64_t step = newest_step(job);
    newest_step_[job] = step;
    for (Test& t : tests) {
      if (!Running(t, step) || now_ns - t.renewed_ns < limits_.lease_ns) continue;
      t.cancelled =
          absl::StrCat("nobody asked for its result for ", limits_.lease_ns / 1'000'000'000,
                       " s: the client that started it went away");
      t.cancel_step = step;
      out.push_back(Request(job, t.report, 0, 0));
    }
  }
  return out;
}

void SelfTestBook::Renew(const std::string& job, uint64_t id, int64_t now_ns) {
  MutexLock lock(&mu_);
  auto it = tests_.find(job);
  if (it == tests_.end()) return;
  for (Test& t : it->second) {
    if (t.report.id() == id) t.renewed_ns = now_ns;
  }
}

SelfTestLoad SelfTestBook::Load(const std::string& job, int64_t newest_step, int64_t now_ns) const {
  MutexLock lock(&mu_);
  newest_step_[job] = newest_step;
  SelfTestLoad load;
  load.limits = limits_;
  load.running = RunningLocked(job);
  load.running_all = RunningLocked("");
  load.steps_last_hour = StepsLastHourLocked(job, now_ns);
  return load;
}

void SelfTestBook::OnStubAnswer(const std::string& job, const v1::SlotHealth& health) {
  if (health.selftest_state() == shm::v1::kSelfTestNone) return;
  MutexLock lock(&mu_);
  auto it = tests_.find(job);
  if (it == tests_.end()) return;
  for (Test& t : it->second) {
    if (t.report.rank() == health.rank() && t.report.first_step() == health.selftest_first_step()) {
      t.stub_state = health.selftest_state();
      t.steps_done = std::max(t.steps_done, health.selftest_steps_done());
    }
  }
}

void SelfTestBook::OnMarkedSteps(const std::string& job, int32_t rank, uint32_t n) {
  MutexLock lock(&mu_);
  auto it = tests_.find(job);
  if (it == tests_.end()) return;
  // Self-tests of a rank run one after another: the marks belong to its latest.
  for (auto t = it->second.rbegin(); t != it->second.rend(); ++t) {
    if (t->report.rank() == rank) {
      t->steps_marked += n;
      return;
    }
  }
}

absl::Status SelfTestBook::Report(const std::string& job, uint64_t id,
                                  const std::vector<v1::VerdictEvent>& verdicts, int64_t now_ns,
                                  v1::GetSelfTestsReply* out) const {
  MutexLock lock(&mu_);
  out->set_job(job);
  auto it = tests_.find(job);
  if (it != tests_.end()) {
    for (const Test& t : it->second) {
      if (id == 0 || t.report.id() == id) Judge(t, verdicts, now_ns, out->add_tests());
    }
  }
  if (id != 0 && out->tests().empty()) {
    return absl::NotFoundError(absl::StrCat("job ", job, " has no self-test ", id));
  }
  return absl::OkStatus();
}

void SelfTestBook::Judge(const Test& t, const std::vector<v1::VerdictEvent>& verdicts,
                         int64_t now_ns, v1::SelfTestReport* out) const {
  *out = t.report;
  out->set_steps_done(t.steps_done);
  out->set_steps_marked(t.steps_marked);
  if (!t.cancelled.empty()) {
    out->set_state("cancelled");
    out->set_detail(t.cancelled);
    return;
  }
  switch (t.stub_state) {
    case shm::v1::kSelfTestNone:
      if (now_ns - t.started_ns > limits_.answer_timeout_ns) {
        out->set_state("unanswered");
        out->set_detail(
            absl::StrCat("rank ", t.report.rank(), "'s stub did not answer within ",
                         limits_.answer_timeout_ns / 1'000'000'000,
                         " s: it predates self-tests (upgrade the stub), or the rank stopped"));
      } else {
        out->set_state("requested");
        out->set_detail("waiting for the stub's answer (sent with the sidecar's health report)");
      }
      return;
    case shm::v1::kSelfTestNotAllowed:
      out->set_state("refused");
      out->set_detail(absl::StrCat("rank ", t.report.rank(),
                                   "'s trainer did not opt in: start it with "
                                   "STAGEFRONTIER_ALLOW_SELFTEST=1 to allow self-tests"));
      return;
    case shm::v1::kSelfTestBadRequest:
      out->set_state("refused");
      out->set_detail(
          "the stub refused the request (stage index or its caps: 1000 ms, 1000 steps)");
      return;
    default:
      break;
  }
  const int64_t first = t.report.first_step();
  const int64_t last = t.report.last_step();
  bool covered = false;  // a closed window reaches the last delayed step
  const v1::Verdict* found = nullptr;
  const v1::Verdict* found_ambiguous = nullptr;
  // True if the window's first suspect is the delayed stage on the delayed rank.
  const auto top = [&](const v1::Verdict& v) {
    return !v.suspects().empty() && v.suspects(0).rank() == t.report.rank() &&
           v.suspects(0).stage() == t.report.stage();
  };
  for (const v1::VerdictEvent& ev : verdicts) {
    const v1::Verdict& v = ev.verdict();
    if (Overlap(v, first, last) == 0) continue;
    out->add_windows(WindowLine(v));
    if (v.last_step() >= last) covered = true;
    if (v.label() == "CLEAR" && top(v) && found == nullptr) found = &v;
    if (v.label() == "AMBIGUOUS" && !v.group_wide() &&
        Contains(v.candidate_ranks(), t.report.rank()) &&
        (Contains(v.candidate_stages(), t.report.stage()) || top(v)) &&
        found_ambiguous == nullptr) {
      found_ambiguous = &v;
    }
  }
  const v1::Verdict* hit = found != nullptr ? found : found_ambiguous;
  if (hit != nullptr && !covered) {
    // Named already, but the answer waits for the window holding the last delayed step: until
    // then the marked records, the windows and the measured shift are partial.
    out->set_state("injecting");
    out->set_detail(absl::StrCat("named in ", WindowLine(*hit),
                                 "; waiting for the window that holds step ", last, " to close"));
    return;
  }
  if (hit != nullptr) {
    out->set_state(found != nullptr ? "found" : "found_ambiguous");
    if (top(*hit) && hit->rank_shift_ns() > 0) {
      // The shift is a mean over the window's steps; the delay went into `overlap` of them.
      const int64_t overlap = Overlap(*hit, first, last);
      out->set_measured_delay_ns(hit->rank_shift_ns() * std::max(1, hit->steps()) / overlap);
      out->set_measured_z(hit->rank_z());
    }
    out->set_detail(absl::StrCat("the verdict named it: ", WindowLine(*hit)));
    return;
  }
  if (!covered) {
    out->set_state("injecting");
    out->set_detail(absl::StrCat("waiting for the window that holds step ", last, " to close"));
    return;
  }
  out->set_state("missed");
  out->set_detail(t.steps_marked == 0
                      ? "no marked record arrived: the delayed stage never ended through the "
                        "stub in those steps, or the records were lost"
                      : "no window named this stage on this rank");
}

}  // namespace stagefrontier
