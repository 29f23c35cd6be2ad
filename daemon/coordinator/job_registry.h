// Every job the coordinator knows, by id: created when a job's first rank declares itself
// (or only for the ids in an allowlist), restored from the data directory at startup.
//
//   JobRegistry jobs(options, &metrics, /*allowed=*/{});
//   absl::Status s = jobs.RestoreAll(log);                    // replays <data_dir>/*.journal
//   absl::StatusOr<std::shared_ptr<JobState>> job = jobs.Declare(declaration);
#ifndef STAGEFRONTIER_DAEMON_COORDINATOR_JOB_REGISTRY_H_
#define STAGEFRONTIER_DAEMON_COORDINATOR_JOB_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/common/mutex.h"
#include "daemon/coordinator/coordinator_metrics.h"
#include "daemon/coordinator/job_state.h"
#include "daemon/events/verdict_bell.h"

namespace stagefrontier {

class JobRegistry {
 public:
  using Log = std::function<void(const std::string&)>;
  // `allowed` empty: any job may declare itself; otherwise only these ids. `log` receives one
  // line per restored, salvaged or refused journal.
  JobRegistry(JobOptions options, CoordinatorMetrics* metrics, std::set<std::string> allowed,
              Log log = nullptr);

  // Replays every regular `<data_dir>/<job>.journal` (symbolic links and other files are
  // skipped, each with a line), and removes the hidden temporaries an interrupted creation or
  // recovery left. A journal whose declaration was lost is held until the job declares
  // itself again (Declare salvages it). Returns the first failure (naming the file); the jobs
  // that restored stay registered.
  [[nodiscard]] absl::Status RestoreAll();

  // The job a rank declares itself for, created on first sight. NotFound for a job outside
  // the allowlist; ResourceExhausted past --max-jobs; the job's CheckDeclaration status for a
  // mismatching rank; JobState::Create's (or Salvage's) errors, Unavailable among them when
  // the data directory cannot take a new journal now.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<JobState>> Declare(
      const v1::RankDeclaration& declaration);

  // The job called `job`, or null.
  std::shared_ptr<JobState> Find(const std::string& job) const;
  std::vector<std::shared_ptr<JobState>> All() const;
  // Journals waiting for their job to declare itself (declaration lost), by job id.
  std::vector<std::string> PendingSalvage() const;
  // What every job rings when it appended verdicts: the registry's own bell, the last of the
  // jobs' observers. Never null.
  VerdictBell* verdict_bell() const { return &own_bell_; }

 private:
  mutable VerdictBell own_bell_;  // before options_, which points at it
  JobOptions options_;
  CoordinatorMetrics* metrics_;
  std::set<std::string> allowed_;
  Log log_;
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<JobState>> jobs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> salvage_ ABSL_GUARDED_BY(mu_);  // job id -> journal path
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_JOB_REGISTRY_H_
