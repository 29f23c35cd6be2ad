#include "daemon/coordinator/job_registry.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "daemon/common/log_safe.h"
#include "shm/monotonic_clock.h"
#include "shm/record_limits.h"

namespace stagefrontier {

JobRegistry::JobRegistry(JobOptions options, CoordinatorMetrics* metrics,
                         std::set<std::string> allowed, Log log)
    : options_(std::move(options)),
      metrics_(metrics),
      allowed_(std::move(allowed)),
      log_(std::move(log)) {
  options_.observers.push_back(&own_bell_);  // last: rung once the others were told
}

absl::Status JobRegistry::RestoreAll() {
  DIR* dir = ::opendir(options_.data_dir.c_str());
  if (dir == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open data directory ", options_.data_dir));
  }
  std::vector<std::string> names;
  std::vector<std::string> leftovers;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name[0] == '.') {
      // Temporaries of an interrupted creation or recovery: never acknowledged, never the
      // only copy of anything.
      if (absl::StrContains(name, ".journal.creating-") ||
          absl::StrContains(name, ".journal.recovering-") ||
          absl::StrContains(name, ".journal.salvaging-") ||
          absl::StrContains(name, ".journal.tail-") ||
          absl::StrContains(name, ".journal.compacting-")) {
        leftovers.push_back(name);
      }
      continue;
    }
    if (absl::EndsWith(name, ".journal")) names.push_back(name);
  }
  ::closedir(dir);
  for (const std::string& name : leftovers) {
    ::unlink(absl::StrCat(options_.data_dir, "/", name).c_str());
  }
  std::sort(names.begin(), names.end());
  absl::Status first;
  auto refuse = [&](const std::string& path, const absl::Status& s) {
    if (first.ok()) first = s;
    if (log_) log_(absl::StrCat("cannot restore ", path, ": ", s.message()));
  };
  for (const std::string& name : names) {
    const std::string path = absl::StrCat(options_.data_dir, "/", name);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      refuse(path, absl::FailedPreconditionError(
                       S_ISLNK(st.st_mode)
                           ? "a symbolic link: journals are never followed out of the data "
                             "directory; left untouched"
                           : "not a regular file; left untouched"));
      continue;
    }
    JournalOpenInfo info;
    absl::StatusOr<std::unique_ptr<JobState>> job =
        JobState::Restore(path, options_, metrics_, &info, shm::MonotonicNowNs());
    if (!job.ok()) {
      const std::string id = name.substr(0, name.size() - sizeof(".journal") + 1);
      if (absl::IsDataLoss(job.status()) && shm::ValidJobId(id)) {
        // Nothing is lost yet: the records wait in the file for the job's next declaration.
        MutexLock lock(&mu_);
        salvage_[id] = path;
        if (log_) {
          log_(absl::StrCat(job.status().message(), "; its intact records will be restored when a ",
                            "rank of job ", id, " declares itself"));
        }
        continue;
      }
      if (IsNoIntactRecord(job.status())) {
        // Nothing in it can be restored: kept under another name, and the job id is free for
        // the job's next declaration (a new journal).
        absl::StatusOr<std::string> aside = SetJournalAside(path);
        if (metrics_ != nullptr) metrics_->journals_set_aside().Increment();
        refuse(path, absl::DataLossError(absl::StrCat(
                         job.status().message(), "; ",
                         aside.ok() ? absl::StrCat("moved aside to ", *aside, " (kept); job ", id,
                                                   " starts a new journal when it declares itself")
                                    : std::string(aside.status().message()))));
        continue;
      }
      refuse(path, job.status());
      continue;
    }
    if (log_) {
      std::string line =
          absl::StrCat("restored job ", (*job)->name(), " from ", path, ": ", info.Describe());
      if ((*job)->replay_skipped() > 0) {
        absl::StrAppend(&line, "; ", (*job)->replay_skipped(), " records could not be applied");
      }
      log_(line);
    }
    MutexLock lock(&mu_);
    AddLocked(std::shared_ptr<JobState>(*std::move(job)));
  }
  MutexLock lock(&mu_);
  for (const auto& [id, job] : current_) TrimGenerationsLocked(id);
  return first;
}

void JobRegistry::AddLocked(std::shared_ptr<JobState> job) {
  std::shared_ptr<JobState>& current = current_[job->id()];
  if (current == nullptr || current->generation() < job->generation()) {
    if (current != nullptr) current->MarkSuperseded();
    current = job;
  } else {
    job->MarkSuperseded();
  }
  jobs_[job->name()] = std::move(job);
}

void JobRegistry::TrimGenerationsLocked(const std::string& id) {
  std::vector<std::shared_ptr<JobState>> runs;
  for (const auto& [name, job] : jobs_) {
    if (job->id() == id) runs.push_back(job);
  }
  std::sort(runs.begin(), runs.end(),
            [](const auto& a, const auto& b) { return a->generation() < b->generation(); });
  for (size_t i = 0; i + kGenerationsKept < runs.size(); ++i) {
    if (runs[i]->superseded()) {
      jobs_.erase(runs[i]->name());
      if (log_) {
        log_(absl::StrCat("job ", runs[i]->name(), " (an earlier run of ", id,
                          ") left memory: more than ", kGenerationsKept,
                          " runs held; its journal stays readable (stagefrontier journal)"));
      }
    }
  }
}

absl::StatusOr<std::shared_ptr<JobState>> JobRegistry::StartGeneration(
    const std::shared_ptr<JobState>& current, const v1::RankDeclaration& decl,
    const std::string& node, const std::string& why) {
  std::shared_ptr<JobState> next;
  {
    MutexLock lock(&mu_);
    auto it = current_.find(current->id());
    if (it != current_.end() && it->second != current) {
      next = it->second;  // another rank's records started it
    } else {
      if (current->generation() >= kMaxGenerations) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "job ", LogSafe(current->id()), " has started ", kMaxGenerations,
            " runs: give a new run its own id (torchrun --rdzv_id), or remove the old journals"));
      }
      // The next free number: a later run's journal that did not restore keeps its own.
      absl::StatusOr<std::unique_ptr<JobState>> job;
      for (uint32_t g = current->generation() + 1; g <= kMaxGenerations; ++g) {
        job = JobState::Create(decl, options_, metrics_, g);
        if (!absl::IsAlreadyExists(job.status())) break;
      }
      if (!job.ok()) return job.status();
      next = std::shared_ptr<JobState>(*std::move(job));
      AddLocked(next);
      TrimGenerationsLocked(next->id());
      if (log_) {
        log_(absl::StrCat("job ", next->id(), ": a new run (", why, "): generation ",
                          next->generation(), ", queried as ", next->id(), " or ", next->name(),
                          "; the previous run stays readable as ", current->id(), "@",
                          current->generation()));
      }
    }
  }
  if (absl::Status s = next->CheckDeclaration(decl); !s.ok()) return s;
  next->NoteOwner(decl, node);
  return next;
}

absl::StatusOr<std::shared_ptr<JobState>> JobRegistry::Declare(const v1::RankDeclaration& decl) {
  MutexLock lock(&mu_);
  auto it = current_.find(decl.job());
  if (it == current_.end()) {
    if (!allowed_.empty() && allowed_.count(decl.job()) == 0) {
      return absl::NotFoundError(absl::StrCat("job \"", LogSafe(decl.job()),
                                              "\" is not one this coordinator accepts (--jobs)"));
    }
    if (static_cast<int32_t>(current_.size()) >= options_.limits.max_jobs) {
      return absl::ResourceExhaustedError(
          absl::StrCat("job \"", LogSafe(decl.job()), "\" refused: this coordinator already holds ",
                       current_.size(), " jobs (--max-jobs)"));
    }
    absl::StatusOr<std::unique_ptr<JobState>> job;
    auto salvage = salvage_.find(decl.job());
    if (salvage != salvage_.end()) {
      JournalOpenInfo info;
      job = JobState::Salvage(salvage->second, decl, options_, metrics_, &info,
                              shm::MonotonicNowNs());
      if (job.ok()) {
        if (log_) {
          log_(absl::StrCat("salvaged job ", decl.job(), " from ", salvage->second,
                            " under the declaration of rank ", decl.rank(), ": ", info.Describe()));
        }
        salvage_.erase(salvage);
      }
    } else {
      job = JobState::Create(decl, options_, metrics_);
    }
    if (!job.ok()) return job.status();
    AddLocked(std::shared_ptr<JobState>(*std::move(job)));
    it = current_.find(decl.job());
  }
  if (absl::Status s = it->second->CheckDeclaration(decl); !s.ok()) return s;
  return it->second;
}

std::shared_ptr<JobState> JobRegistry::Find(const std::string& job) const {
  std::string id;
  uint32_t generation = 0;
  if (!ParseJobName(job, &id, &generation)) return nullptr;
  MutexLock lock(&mu_);
  if (generation == 0) {
    auto it = current_.find(id);
    return it == current_.end() ? nullptr : it->second;
  }
  auto it = jobs_.find(GenerationName(id, generation));
  return it == jobs_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<JobState>> JobRegistry::All() const {
  MutexLock lock(&mu_);
  std::vector<std::shared_ptr<JobState>> out;
  for (const auto& [name, job] : jobs_) out.push_back(job);
  return out;
}

std::vector<std::string> JobRegistry::PendingSalvage() const {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [job, path] : salvage_) out.push_back(job);
  return out;
}

}  // namespace stagefrontier
