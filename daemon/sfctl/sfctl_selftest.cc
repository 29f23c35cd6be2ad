#include "daemon/sfctl/sfctl_selftest.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "daemon/common/grpc_security.h"
#include "daemon/common/proto_json.h"
#include "daemon/sfctl/sfctl_render.h"
#include "daemon/sfctl/sfctl_status.h"

namespace stagefrontier {
namespace {

constexpr int kFound = 0;
constexpr int kNotRun = kExitRefused;
constexpr int kUnreachable = kExitUnreachable;
constexpr int kMissed = 4;

std::unique_ptr<grpc::ClientContext> Context(const std::string& token, int timeout_s) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  AttachToken(ctx.get(), token);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(timeout_s));
  return ctx;
}

constexpr int kInterrupted = 130;

// Set by SIGINT / SIGTERM while a probe runs: the probe is cancelled, then sfctl exits.
std::atomic<int> interrupted{0};
void OnInterrupt(int sig) { interrupted.store(sig); }

// Asks the coordinator to cancel self-test `id` of the job.
grpc::Status SendCancel(v1::Query::Stub& stub, const std::string& token, const SelfTestOptions& o,
                        uint64_t id, v1::ControlReply* reply) {
  v1::ControlCommand cmd;
  cmd.set_job(o.job);
  cmd.mutable_selftest()->set_cancel_id(id);
  return stub.Control(Context(token, o.call_timeout_s).get(), cmd, reply);
}

// Stops self-test `id` (best effort: the coordinator cancels it anyway once nobody asks).
void CancelProbe(v1::Query::Stub& stub, const std::string& token, const SelfTestOptions& o,
                 uint64_t id, std::ostream& out) {
  v1::ControlReply reply;
  const grpc::Status s = SendCancel(stub, token, o, id, &reply);
  if (!o.json) out << (s.ok() ? reply.message() : "cancel: " + s.error_message()) << "\n";
}

// (kNotRun and kUnreachable are sfctl's kExitRefused and kExitUnreachable.)
int Failed(const grpc::Status& s) { return ReportCallError(s); }

bool Terminal(const std::string& state) {
  return state == "found" || state == "found_ambiguous" || state == "missed" ||
         state == "refused" || state == "unanswered" || state == "cancelled";
}

int Outcome(const std::string& state) {
  if (state == "found" || state == "found_ambiguous") return kFound;
  return state == "missed" ? kMissed : kNotRun;
}

// Starts one probe and waits for its outcome (or opts.wait_s). Fills *report; returns the
// probe's exit status.
int RunProbe(v1::Query::Stub& stub, const std::string& token, const SelfTestOptions& o,
             int32_t rank, const std::string& stage, uint32_t lead, std::ostream& out,
             v1::SelfTestReport* report) {
  v1::ControlCommand cmd;
  cmd.set_job(o.job);
  v1::SelfTestCommand* t = cmd.mutable_selftest();
  t->set_rank(rank);
  t->set_stage(stage);
  t->set_delay_ms(o.delay_ms);
  t->set_steps(o.steps);
  t->set_lead_steps(lead);
  v1::ControlReply started;
  if (grpc::Status s = stub.Control(Context(token, o.call_timeout_s).get(), cmd, &started);
      !s.ok()) {
    return Failed(s);
  }
  if (!o.json && !o.sweep) out << started.message() << "\n" << std::flush;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(o.wait_s);
  v1::GetSelfTestsRequest req;
  req.set_job(o.job);
  req.set_id(started.request_id());
  while (true) {
    v1::GetSelfTestsReply r;
    if (grpc::Status s = stub.GetSelfTests(Context(token, o.call_timeout_s).get(), req, &r);
        !s.ok()) {
      return Failed(s);
    }
    if (!r.tests().empty()) *report = r.tests(0);
    if (Terminal(report->state())) return Outcome(report->state());
    if (interrupted.load() != 0) {
      CancelProbe(stub, token, o, started.request_id(), out);
      return kInterrupted;
    }
    if (std::chrono::steady_clock::now() > give_up) {
      CancelProbe(stub, token, o, started.request_id(), out);
      report->set_detail(absl::StrCat("gave up after ", o.wait_s, " s while ", report->state(),
                                      ": ", report->detail()));
      report->set_state("timed_out");
      return kNotRun;
    }
    for (int i = 0; i < 10 && interrupted.load() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

bool RankTargeted(const v1::Verdict& v) {
  return v.label() == "CLEAR" || (v.label() == "AMBIGUOUS" && !v.group_wide());
}

}  // namespace

std::string RenderSelfTest(const v1::SelfTestReport& t) {
  std::string measured = "-";
  if (t.measured_delay_ns() > 0) {
    measured = absl::StrFormat("%.1f ms (z %.1f)", t.measured_delay_ns() / 1e6, t.measured_z());
  }
  return absl::StrFormat("%-4d %-6d %-16s %6d %10d..%-10d %-16s %8d/%-4d %-20s %s\n", t.id(),
                         t.rank(), t.stage(), t.delay_ms(), t.first_step(), t.last_step(),
                         t.state(), t.steps_marked(), t.steps_done(), measured, t.detail());
}

namespace {

std::string SelfTestHeader() {
  return absl::StrFormat("%-4s %-6s %-16s %6s %22s %-16s %13s %-20s %s\n", "ID", "RANK", "STAGE",
                         "MS", "STEPS", "STATE", "MARKED/DONE", "MEASURED", "DETAIL");
}

// sfctl selftest --list: every self-test of the job with its state.
int ListSelfTests(v1::Query::Stub& stub, const std::string& token, const SelfTestOptions& o,
                  std::ostream& out) {
  v1::GetSelfTestsRequest req;
  req.set_job(o.job);
  v1::GetSelfTestsReply r;
  if (grpc::Status s = stub.GetSelfTests(Context(token, o.call_timeout_s).get(), req, &r);
      !s.ok()) {
    return Failed(s);
  }
  if (o.json) {
    out << ProtoToJson(r) << "\n";
  } else {
    out << SelfTestHeader();
    for (const v1::SelfTestReport& t : r.tests()) out << RenderSelfTest(t);
  }
  return kFound;
}

// The sweep's probes: the stages and ranks asked for, or the job's non-sync stages on its first,
// middle and last ranks.
void SweepTargets(const v1::JobInfo& job, const SelfTestOptions& o,
                  std::vector<std::string>* stages, std::vector<int32_t>* ranks) {
  *stages = o.stages;
  if (stages->empty()) {
    for (const v1::Stage& s : job.stages()) {
      if (s.kind() != v1::STAGE_KIND_SYNC) stages->push_back(s.name());
    }
  }
  *ranks = o.ranks;
  if (ranks->empty()) {
    const int32_t w = job.world_size();
    *ranks = {0, w / 2, w - 1};
    std::sort(ranks->begin(), ranks->end());
    ranks->erase(std::unique(ranks->begin(), ranks->end()), ranks->end());
  }
}

struct FalseAlarms {
  int clean = 0;                    // windows of the sweep that hold no delayed step
  std::vector<std::string> alarms;  // the rank-targeted verdicts among them
};

FalseAlarms CountFalseAlarms(v1::Query::Stub& stub, const std::string& token,
                             const SelfTestOptions& o,
                             const std::vector<v1::SelfTestReport>& reports, uint32_t lead) {
  FalseAlarms out;
  if (reports.empty()) return out;
  const int64_t span_first = reports.front().first_step() - lead;
  const int64_t span_last = reports.back().last_step();
  v1::WatchVerdictsRequest wreq;
  wreq.set_job(o.job);
  auto ctx = Context(token, 2);
  auto reader = stub.WatchVerdicts(ctx.get(), wreq);
  v1::VerdictEvent ev;
  while (reader->Read(&ev)) {
    const v1::Verdict& v = ev.verdict();
    if (v.first_step() < span_first || v.last_step() > span_last) continue;
    const bool injected = std::any_of(reports.begin(), reports.end(), [&](const auto& r) {
      return v.first_step() <= r.last_step() && r.first_step() <= v.last_step();
    });
    if (injected) continue;
    ++out.clean;
    if (RankTargeted(v)) {
      out.alarms.push_back(absl::StrCat(v.label(), v.reason().empty() ? "" : " ", v.reason(),
                                        " (steps ", v.first_step(), "..", v.last_step(), ")"));
    }
  }
  (void)reader->Finish();  // ends with DEADLINE_EXCEEDED once the held verdicts are read
  return out;
}

// Probes every (stage, rank) of the job in turn, then counts the false alarms between them.
int RunSweep(v1::Query::Stub& stub, const std::string& token, const SelfTestOptions& o,
             std::ostream& out) {
  v1::ListJobsReply jobs;
  if (grpc::Status s = stub.ListJobs(Context(token, o.call_timeout_s).get(), {}, &jobs); !s.ok()) {
    return Failed(s);
  }
  const auto job = std::find_if(jobs.jobs().begin(), jobs.jobs().end(),
                                [&](const v1::JobInfo& j) { return j.job() == o.job; });
  if (job == jobs.jobs().end()) {
    std::cerr << "sfctl: no job \"" << o.job << "\" on this coordinator\n";
    return kNotRun;
  }
  std::vector<std::string> stages;
  std::vector<int32_t> ranks;
  SweepTargets(*job, o, &stages, &ranks);
  if (!o.json) out << SelfTestHeader();
  // A whole delay-free window between probes, so that false alarms can be counted.
  const uint32_t lead = o.lead_steps > 0 ? o.lead_steps : job->window_steps() + 20;
  std::vector<v1::SelfTestReport> reports;
  int found = 0, not_run = 0;
  for (const std::string& stage : stages) {
    for (int32_t rank : ranks) {
      v1::SelfTestReport r;
      const int rc = RunProbe(stub, token, o, rank, stage, lead, out, &r);
      if (rc == kUnreachable || rc == kInterrupted) return rc;
      if (r.id() == 0) {
        ++not_run;
        continue;
      }
      if (rc == kFound) ++found;
      if (rc == kNotRun) ++not_run;
      if (!o.json) out << RenderSelfTest(r) << std::flush;
      reports.push_back(std::move(r));
    }
  }
  const FalseAlarms fa = CountFalseAlarms(stub, token, o, reports, lead);
  const int probes = static_cast<int>(stages.size() * ranks.size());
  if (o.json) {
    v1::GetSelfTestsReply all;
    all.set_job(o.job);
    for (const auto& r : reports) *all.add_tests() = r;
    out << ProtoToJson(all) << "\n";
  }
  out << absl::StrFormat(
      "self-test sweep of job %s: detected %d of %d probes (%.0f%%)%s; false alarms: %d of %d "
      "windows without a delay%s\n",
      o.job, found, probes, probes > 0 ? 100.0 * found / probes : 0.0,
      not_run > 0 ? absl::StrCat(", ", not_run, " could not run") : "", fa.alarms.size(), fa.clean,
      fa.alarms.empty() ? "" : absl::StrCat(" (", absl::StrJoin(fa.alarms, "; "), ")"));
  if (not_run > 0) return kNotRun;
  return found == probes && fa.alarms.empty() ? kFound : kMissed;
}

}  // namespace

int RunSelfTest(v1::Query::Stub& stub, const std::string& token, const SelfTestOptions& o,
                std::ostream& out) {
  if (o.list) return ListSelfTests(stub, token, o, out);
  if (o.cancel_id != 0) {
    v1::ControlReply reply;
    if (grpc::Status s = SendCancel(stub, token, o, o.cancel_id, &reply); !s.ok()) {
      return Failed(s);
    }
    out << reply.message() << "\n";
    return kFound;
  }
  // Interrupted while a probe runs: the probe is cancelled before sfctl exits.
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
  if (o.sweep) return RunSweep(stub, token, o, out);
  v1::SelfTestReport report;
  const int rc = RunProbe(stub, token, o, o.rank, o.stage, o.lead_steps, out, &report);
  if (report.id() == 0) return rc;
  out << (o.json ? ProtoToJson(report) + "\n" : SelfTestHeader() + RenderSelfTest(report));
  return rc;
}

namespace {

struct SelfTestFlags {
  SelfTestOptions options;
  std::string ranks;
  std::string stages;
};

}  // namespace

SfctlCommand SelfTestCommand() {
  return {
      "selftest", "add a known delay on one rank and check that the verdict finds it",
      [](CLI::App* sub) -> SfctlRun {
        auto f = std::make_shared<SelfTestFlags>();
        SelfTestOptions& st = f->options;
        sub->add_option("--job", st.job, "job id")->required();
        sub->add_option("--rank", st.rank, "the rank to delay");
        sub->add_option("--stage", st.stage, "the stage to delay");
        sub->add_option("--delay-ms", st.delay_ms, "delay per step (1..1000)")
            ->capture_default_str();
        sub->add_option("--steps", st.steps, "steps to delay (1..1000)")->capture_default_str();
        sub->add_option("--lead-steps", st.lead_steps,
                        "start this many steps ahead (0: the coordinator picks)");
        sub->add_option("--wait", st.wait_s, "seconds to wait for one probe's result")
            ->capture_default_str();
        sub->add_flag("--sweep", st.sweep, "probe several stages and ranks; print the rates");
        sub->add_option("--ranks", f->ranks, "sweep: ranks, comma-separated (default 0,mid,last)");
        sub->add_option("--stages", f->stages, "sweep: stages, comma-separated (default non-sync)");
        sub->add_option("--cancel", st.cancel_id,
                        "cancel self-test ID of the job (its rank stops delaying at once)");
        sub->add_flag("--list", st.list, "list the job's self-tests and their states");
        return [f](const SfctlCall& call) {
          SelfTestOptions& o = f->options;
          o.json = call.globals.json;
          o.call_timeout_s = call.globals.timeout_s;
          if (o.cancel_id == 0 && !o.list && !o.sweep && (o.rank < 0 || o.stage.empty())) {
            return SfctlUsageError("selftest wants --rank and --stage (or --sweep)");
          }
          if (std::string bad; !ParseRankList(f->ranks, &o.ranks, &bad)) {
            return SfctlUsageError("--ranks wants numbers, got \"" + bad + "\"");
          }
          for (absl::string_view s : absl::StrSplit(f->stages, ',', absl::SkipEmpty())) {
            o.stages.emplace_back(s);
          }
          return RunSelfTest(*call.stub, call.token, o, *call.out);
        };
      }};
}

}  // namespace stagefrontier
