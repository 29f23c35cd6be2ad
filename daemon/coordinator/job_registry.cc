#include "daemon/coordinator/job_registry.h"

#include <dirent.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "shm/monotonic_clock.h"

namespace stagefrontier {

JobRegistry::JobRegistry(JobOptions options, CoordinatorMetrics* metrics,
                         std::set<std::string> allowed)
    : options_(std::move(options)), metrics_(metrics), allowed_(std::move(allowed)) {}

absl::Status JobRegistry::RestoreAll(const std::function<void(const std::string&)>& log) {
  DIR* dir = ::opendir(options_.data_dir.c_str());
  if (dir == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open data directory ", options_.data_dir));
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (absl::EndsWith(name, ".journal") && name[0] != '.') names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  absl::Status first;
  for (const std::string& name : names) {
    const std::string path = absl::StrCat(options_.data_dir, "/", name);
    JournalOpenInfo info;
    absl::StatusOr<std::unique_ptr<JobState>> job =
        JobState::Restore(path, options_, metrics_, &info, shm::MonotonicNowNs());
    if (!job.ok()) {
      if (first.ok()) first = job.status();
      if (log) log(absl::StrCat("cannot restore ", path, ": ", job.status().message()));
      continue;
    }
    if (log) {
      std::string line = absl::StrCat("restored job ", (*job)->name(), " from ", path, ": ",
                                      info.records, " records");
      if (info.truncated_bytes > 0) {
        absl::StrAppend(&line, "; cut off a damaged tail of ", info.truncated_bytes, " bytes (",
                        info.truncation_reason, ")");
      }
      log(line);
    }
    // Take the name first: in `a = b`, b (which moves the job out) is evaluated before a.
    std::shared_ptr<JobState> restored(*std::move(job));
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[restored->name()] = std::move(restored);
  }
  return first;
}

absl::StatusOr<std::shared_ptr<JobState>> JobRegistry::Declare(const v1::RankDeclaration& decl) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(decl.job());
  if (it == jobs_.end()) {
    if (!allowed_.empty() && allowed_.count(decl.job()) == 0) {
      return absl::NotFoundError(
          absl::StrCat("job \"", decl.job(), "\" is not one this coordinator accepts (--jobs)"));
    }
    absl::StatusOr<std::unique_ptr<JobState>> job = JobState::Create(decl, options_, metrics_);
    if (!job.ok()) return job.status();
    it = jobs_.emplace(decl.job(), std::shared_ptr<JobState>(*std::move(job))).first;
  }
  if (absl::Status s = it->second->CheckDeclaration(decl); !s.ok()) return s;
  return it->second;
}

std::shared_ptr<JobState> JobRegistry::Find(const std::string& job) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<JobState>> JobRegistry::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<JobState>> out;
  for (const auto& [name, job] : jobs_) out.push_back(job);
  return out;
}

}  // namespace stagefrontier
