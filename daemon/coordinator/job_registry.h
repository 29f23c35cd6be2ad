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
//
// Jobs that ended leave memory when room is needed: a job none of whose ranks showed life for
// --job-retire-idle-ms (JobState::IdleFor) and that nothing but the registry uses is retired,
// least recently active first, when a new job would pass --max-jobs or the memory budget. Its
// journal stays; the job is restored from it if a rank of it declares itself again. A restart
// restores the --max-jobs most recently written jobs and leaves the others retired.
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

  // The job a rank declares itself for, created on first sight (or restored, if it was
  // retired). NotFound for a job outside the allowlist; ResourceExhausted past --max-jobs or
  // the memory budget with no idle job to retire; the job's CheckDeclaration status for a
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
  // The journal of job id `id` if it was retired from memory (it ended; see above), else "".
  std::string RetiredJournal(const std::string& id) const;
  // Jobs retired from memory since the start (restored ones included).
  uint64_t retired_count() const;
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
  // Every run of job id `id` held (its entries in jobs_).
  std::vector<std::map<std::string, std::shared_ptr<JobState>>::iterator> RunsLocked(
      const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every run of `id` (`current` its current one) idle and used by nothing but the registry.
  bool RetirableLocked(const std::string& id, const std::shared_ptr<JobState>& current,
                       int64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes `job` its id's current generation if it is the newest; marks the others superseded.
  void AddLocked(std::shared_ptr<JobState> job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unloads `id`'s oldest generations beyond kGenerationsKept (never the current one).
  void TrimGenerationsLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether retiring every job that may leave would free room for `needed_bytes` more in the
  // memory budget (true for a refusal by count, `needed_bytes` 0): none leaves for a job that
  // would not fit anyway.
  bool RoomCanBeMadeLocked(int64_t needed_bytes, int64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Retires the least recently active job whose runs are all idle and used by nothing but the
  // registry (they leave memory synchronously, observers told: a job of the same name may be
  // restored next). False if none may go.
  bool RetireIdleLocked(int64_t now_ns, const std::string& for_job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new job for `decl` (none of its id held): from its retired journal, its salvaged one,
  // or created.
  absl::StatusOr<std::unique_ptr<JobState>> NewJobLocked(const v1::RankDeclaration& decl,
                                                         int64_t now_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The data directory's `<job>.journal` names, sorted; removes the hidden temporaries an
  // interrupted creation or recovery left.
  absl::StatusOr<std::vector<std::string>> ListJournals() const;
  // RestoreAll's choice: the journals of the --max-jobs ids written last (all of them when
  // fewer); the other ids are noted retired, each with its newest generation's journal.
  std::vector<std::string> NewestJobsLocked(const std::vector<std::string>& names)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::map<std::string, std::shared_ptr<JobState>> jobs_ ABSL_GUARDED_BY(mu_);     // by name
  std::map<std::string, std::shared_ptr<JobState>> current_ ABSL_GUARDED_BY(mu_);  // by id
  std::map<std::string, std::string> salvage_ ABSL_GUARDED_BY(mu_);  // job id -> journal path
  std::map<std::string, std::string> retired_ ABSL_GUARDED_BY(mu_);  // job id -> journal path
  uint64_t retired_count_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_COORDINATOR_JOB_REGISTRY_H_
