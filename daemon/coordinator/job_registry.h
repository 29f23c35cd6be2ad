// Every job the coordinator knows, by id: created when a job's first rank declares itself
// (or only for the ids in an allowlist), restored from the data directory at startup.
//
//   JobRegistry jobs(options, &metrics, /*allowed=*/{});
//   absl::Status s = jobs.RestoreAll();                       // replays <data_dir>/*.journal
//   absl::StatusOr<std::shared_ptr<JobState>> job = jobs.Declare(declaration);
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_JOB_REGISTRY_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_JOB_REGISTRY_H_

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/coordinator/job_state.h"

namespace stagefrontier {

class JobRegistry {
 public:
  // `allowed` empty: any job may declare itself; otherwise only these ids.
  JobRegistry(JobOptions options, CoordinatorMetrics* metrics, std::set<std::string> allowed);

  // Replays every `<data_dir>/*.journal`. Returns the first failure (naming the file); the
  // jobs that restored stay registered. `log` receives one line per job.
  [[nodiscard]] absl::Status RestoreAll(const std::function<void(const std::string&)>& log);

  // The job a rank declares itself for, created on first sight. NOT_FOUND for a job outside
  // the allowlist; the job's CheckDeclaration status for a mismatching rank; Create's errors.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<JobState>> Declare(
      const v1::RankDeclaration& declaration);

  // The job called `job`, or null.
  std::shared_ptr<JobState> Find(const std::string& job) const;
  std::vector<std::shared_ptr<JobState>> All() const;

 private:
  JobOptions options_;
  CoordinatorMetrics* metrics_;
  std::set<std::string> allowed_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<JobState>> jobs_;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_JOB_REGISTRY_H_
