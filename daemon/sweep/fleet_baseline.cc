#include "daemon/sweep/fleet_baseline.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/nodes/node_name.h"

namespace stagefrontier {
namespace {

double Median(std::vector<double> v) {
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  double m = v[mid];
  if (v.size() % 2 == 0) m = (m + *std::max_element(v.begin(), v.begin() + mid)) / 2;
  return m;
}

bool SafeCheckName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<FleetBaseline>> FleetBaseline::Open(
    const FleetBaselineOptions& options, JournalOpenInfo* info) {
  std::unique_ptr<FleetBaseline> fleet(new FleetBaseline(options));
  FleetBaseline* f = fleet.get();
  absl::StatusOr<std::unique_ptr<RecordLog>> opened = RecordLog::OpenOrCreate(
      options.path, options.fsync,
      [f](const v1::JournalRecord& r) {
        if (r.body_case() == v1::JournalRecord::kSweep) {
          for (const v1::SweepCheck& c : r.sweep().checks()) f->AddLocked(c);
        }
        return absl::OkStatus();
      },
      info);
  if (!opened.ok()) return opened.status();
  fleet->file_ = std::move(*opened);
  return fleet;
}

void FleetBaseline::AddLocked(const v1::SweepCheck& c) {
  if (c.state() != "measured" || !SafeCheckName(c.name()) || !std::isfinite(c.value()) ||
      c.value() < 0) {
    return;
  }
  auto it = samples_.find(c.name());
  if (it == samples_.end()) {
    if (samples_.size() >= options_.max_checks) return;
    it = samples_.emplace(c.name(), std::deque<double>()).first;
  }
  it->second.push_back(c.value());
  while (it->second.size() > options_.samples_kept) it->second.pop_front();
}

absl::StatusOr<v1::SweepJudgement> FleetBaseline::Judge(const v1::SweepReport& report,
                                                        int64_t wall_time_ns) {
  if (!SafeNodeName(report.node())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sweep: node name \"", report.node().substr(0, 64), "\" must be 1-253 of [A-Za-z0-9._-]"));
  }
  if (report.checks_size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("sweep: ", report.checks_size(), " checks (at most 64)"));
  }
  for (const v1::SweepCheck& c : report.checks()) {
    if (!SafeCheckName(c.name())) {
      return absl::InvalidArgumentError(
          absl::StrCat("sweep: check name \"", c.name().substr(0, 64), "\" must be [a-z0-9_]"));
    }
    if (c.state() == "measured" && (!std::isfinite(c.value()) || c.value() < 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sweep: check ", c.name(), " has value ", c.value()));
    }
  }
  v1::SweepJudgement out;
  out.set_node(report.node());
  bool passed = true;
  std::lock_guard<std::mutex> lock(mu_);
  for (const v1::SweepCheck& c : report.checks()) {
    v1::SweepCheckJudgement* j = out.add_checks();
    j->set_name(c.name());
    j->set_value(c.value());
    if (c.state() == "skipped") {
      j->set_verdict("skipped");
      j->set_detail(c.detail());
      continue;
    }
    if (c.state() != "measured") {
      j->set_verdict("failed");
      j->set_detail(c.detail());
      passed = false;
      continue;
    }
    auto it = samples_.find(c.name());
    const size_t n = it == samples_.end() ? 0 : it->second.size();
    j->set_fleet_samples(static_cast<int32_t>(n));
    if (n < options_.min_samples) {
      j->set_verdict("bootstrap");
      j->set_detail(absl::StrCat("the fleet has ", n, " figures of ", options_.min_samples,
                                 " needed to judge; this one joins them"));
      continue;
    }
    std::vector<double> v(it->second.begin(), it->second.end());
    const double median = Median(v);
    for (double& x : v) x = std::fabs(x - median);
    const double robust_sd = 1.4826 * Median(std::move(v));
    const double threshold =
        median - std::max(options_.robust_sds * robust_sd, options_.max_drop * median);
    j->set_fleet_median(median);
    j->set_threshold(threshold);
    if (c.value() < threshold) {
      j->set_verdict("fail");
      j->set_detail(absl::StrFormat("%.3g %s is %.0f%% below the fleet median %.3g", c.value(),
                                    c.unit(), 100 * (1 - c.value() / median), median));
      passed = false;
    } else {
      j->set_verdict("pass");
    }
  }
  out.set_passed(passed);
  if (passed) {
    v1::JournalRecord rec;
    v1::SweepRecorded* s = rec.mutable_sweep();
    s->set_node(report.node());
    s->set_wall_time_ns(wall_time_ns);
    for (const v1::SweepCheck& c : report.checks()) {
      if (c.state() != "measured") continue;
      AddLocked(c);
      *s->add_checks() = c;
      s->mutable_checks()->rbegin()->clear_detail();
    }
    file_->Append(rec);
  }
  return out;
}

absl::Status FleetBaseline::Flush() { return file_->Flush(); }

size_t FleetBaseline::samples(const std::string& check) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = samples_.find(check);
  return it == samples_.end() ? 0 : it->second.size();
}

}  // namespace stagefrontier
