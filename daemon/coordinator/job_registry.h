// Every job the coordinator knows, by id: created when a job's first rank declares itself
// (or only for the ids in an allowlist), restored from the data directory at startup. A job id
// may hold several runs, its generations: when the job's ranks come back as new processes
// at an earlier step (a script run again under the same id), the next generation starts,
// named "<id>@<N>", and the earlier ones stay readable (docs/user-guide.md "Re-runs").
//
//   JobRegistry jobs(options, &metrics, /*allowed=*/{});
//   absl::Status s = jobs.RestoreAll(log);                    // replays <data_dir>/*.journal
//   absl::StatusOr<std::shared_ptr<JobState>> job = jobs.Declare(declaration);
//   jobs.Find("run42");      // the newest generation of run42
//   jobs.Find("run42@1");    // its first run
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
#include "base/mutex.h"
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

  // The job's next generation, started because `current` saw a re-run (IngestCounts::new_run)
  // of the rank `declaration` declares; that rank's process is noted on it. When another
  // stream started it first, that generation is returned. Older generations beyond
  // kGenerationsKept leave memory (their journals stay). Fails as Declare.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<JobState>> StartGeneration(
      const std::shared_ptr<JobState>& current, const v1::RankDeclaration& declaration,
      const std::string& node, const std::string& why);

  // The job a name names ("run42": its newest generation; "run42@2": that one), or null.
  std::shared_ptr<JobState> Find(const std::string& job) const;
  // Every generation of every job held.
  std::vector<std::shared_ptr<JobState>> All() const;
  // Generations of one job id held in memory at most (the current one included).
  static constexpr int kGenerationsKept = 4;
  // Runs of one job id at most (journals on disk): a sidecar cannot make a job start runs
  // without end.
  static constexpr uint32_t kMaxGenerations = 256;
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
  // Makes `job` its id's current generation if it is the newest; marks the others superseded.
  void AddLocked(std::shared_ptr<JobState> job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unloads `id`'s oldest generations beyond kGenerationsKept (never the current one).
  void TrimGenerationsLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::map<std::string, std::shared_ptr<JobState>> jobs_ ABSL_GUARDED_BY(mu_);     // by name
  std::map<std::string, std::shared_ptr<JobState>> current_ ABSL_GUARDED_BY(mu_);  // by id
  std::map<std::string, std::string> salvage_ ABSL_GUARDED_BY(mu_);  // job id -> journal path
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_JOB_REGISTRY_H_
