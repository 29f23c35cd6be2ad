#include "daemon/coordinator/job_registry.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/mutex.h"
#include "daemon/common/log_safe.h"
#include "shm/monotonic_clock.h"
#include "shm/record_limits.h"

namespace stagefrontier {

namespace {

// A file's modification time, in nanoseconds since the epoch.
int64_t MtimeNs(const struct stat& st) {
  return int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

JobRegistry::JobRegistry(JobOptions options, CoordinatorMetrics* metrics,
                         std::set<std::string> allowed, Log log)
    : options_(std::move(options)),
      metrics_(metrics),
      allowed_(std::move(allowed)),
      log_(std::move(log)) {
  options_.observers.push_back(&own_bell_);  // last: rung once the others were told
}

absl::StatusOr<std::vector<std::string>> JobRegistry::ListJournals() const {
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
  return names;
}

absl::Status JobRegistry::RestoreAll() {
  absl::StatusOr<std::vector<std::string>> listed = ListJournals();
  if (!listed.ok()) return listed.status();
  std::vector<std::string> names;
  {
    MutexLock lock(&mu_);
    names = NewestJobsLocked(*listed);
  }
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
    // Idle since the journal was last written (a restart does not make every job look active
    // for --job-retire-idle-ms and shut new jobs out meanwhile).
    const int64_t age_ns = std::max<int64_t>(0, absl::ToUnixNanos(absl::Now()) - MtimeNs(st));
    (*job)->set_last_active_ns(shm::MonotonicNowNs() - age_ns);
    MutexLock lock(&mu_);
    AddLocked(std::shared_ptr<JobState>(*std::move(job)));
  }
  MutexLock lock(&mu_);
  for (const auto& [id, job] : current_) TrimGenerationsLocked(id);
  return first;
}

std::vector<std::string> JobRegistry::NewestJobsLocked(const std::vector<std::string>& names) {
  struct Id {
    uint32_t newest_generation = 0;
    std::string newest_name;  // its newest generation's journal
    std::vector<std::string> names;
  };
  std::map<std::string, Id> ids;
  std::vector<std::string> unparsed;  // left to RestoreAll's own checks
  for (const std::string& name : names) {
    std::string id;
    uint32_t generation = 0;
    if (!ParseJobName(name.substr(0, name.size() - sizeof(".journal") + 1), &id, &generation)) {
      unparsed.push_back(name);
      continue;
    }
    Id& i = ids[id];
    if (i.newest_name.empty() || std::max<uint32_t>(generation, 1) > i.newest_generation) {
      i.newest_generation = std::max<uint32_t>(generation, 1);
      i.newest_name = name;
    }
    i.names.push_back(name);
  }
  if (static_cast<int64_t>(ids.size()) <= options_.limits.max_jobs) return names;
  // Only past the limit do the journals' ages matter: the common start-up stats each once (in
  // RestoreAll), not twice.
  std::vector<std::pair<int64_t, std::string>> by_age;
  for (const auto& [id, i] : ids) {
    int64_t newest_mtime_ns = 0;
    for (const std::string& name : i.names) {
      struct stat st {};
      if (::lstat(absl::StrCat(options_.data_dir, "/", name).c_str(), &st) == 0) {
        newest_mtime_ns = std::max(newest_mtime_ns, MtimeNs(st));
      }
    }
    by_age.emplace_back(newest_mtime_ns, id);
  }
  std::sort(by_age.begin(), by_age.end(), std::greater<>());
  std::vector<std::string> kept = std::move(unparsed);
  for (size_t k = 0; k < by_age.size(); ++k) {
    const Id& i = ids[by_age[k].second];
    if (static_cast<int64_t>(k) < options_.limits.max_jobs) {
      kept.insert(kept.end(), i.names.begin(), i.names.end());
    } else {
      retired_[by_age[k].second] = absl::StrCat(options_.data_dir, "/", i.newest_name);
      ++retired_count_;
    }
  }
  if (log_) {
    log_(absl::StrCat(ids.size(), " jobs have journals in ", options_.data_dir, ": restoring the ",
                      options_.limits.max_jobs, " written last (--max-jobs); the other ",
                      ids.size() - static_cast<size_t>(options_.limits.max_jobs),
                      " stay on disk, each restored when a rank of it declares itself"));
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

std::vector<std::map<std::string, std::shared_ptr<JobState>>::iterator> JobRegistry::RunsLocked(
    const std::string& id) {
  std::vector<std::map<std::string, std::shared_ptr<JobState>>::iterator> runs;
  if (auto first = jobs_.find(id); first != jobs_.end()) runs.push_back(first);
  // Later runs are "<id>@<N>": between "<id>@" and "<id>A" ('A' follows '@').
  for (auto it = jobs_.lower_bound(id + "@"); it != jobs_.end() && it->first < id + "A"; ++it) {
    runs.push_back(it);
  }
  return runs;
}

bool JobRegistry::RetirableLocked(const std::string& id, const std::shared_ptr<JobState>& current,
                                  int64_t now_ns) {
  const int64_t idle_ns = options_.limits.job_retire_idle_ms * 1'000'000;
  for (const auto& run : RunsLocked(id)) {
    // Held by the registry only (current_ and jobs_ for the current run, jobs_ for an earlier
    // one): no stream, watch, acknowledgement or query uses it, and none can start to without
    // this lock. Every run idle: an earlier one a stream still feeds is not.
    const long held_here = run->second == current ? 2 : 1;
    if (!run->second->IdleFor(now_ns, idle_ns) || run->second.use_count() > held_here) {
      return false;
    }
  }
  return true;
}

bool JobRegistry::RoomCanBeMadeLocked(int64_t needed_bytes, int64_t now_ns) {
  MemoryBudget* budget = options_.budget;
  if (needed_bytes <= 0 || budget == nullptr) return true;  // a count: one job leaving will do
  int64_t freeable = 0;
  for (const auto& [id, job] : current_) {
    if (!RetirableLocked(id, job, now_ns)) continue;
    for (const auto& run : RunsLocked(id)) freeable += run->second->reserved_bytes();
  }
  return budget->used() - freeable + needed_bytes <= budget->total();
}

bool JobRegistry::RetireIdleLocked(int64_t now_ns, const std::string& for_job) {
  const std::string* victim = nullptr;
  int64_t oldest = 0;
  for (const auto& [id, job] : current_) {
    if (victim != nullptr && job->last_active_ns() >= oldest) continue;
    if (!RetirableLocked(id, job, now_ns)) continue;
    victim = &id;
    oldest = job->last_active_ns();
  }
  if (victim == nullptr) return false;
  const std::string id = *victim;
  std::vector<std::shared_ptr<JobState>> leaving;  // freed before this returns
  for (const auto& run : RunsLocked(id)) {
    // Observers are below the registry's lock as below a job's (verdict_observer.h): told
    // here, no restored run of the same name can be told to forget by a late call.
    for (VerdictObserver* o : options_.observers) o->OnJobRetired(run->first);
    leaving.push_back(std::move(run->second));
    jobs_.erase(run);
  }
  const std::string path = JournalPath(options_.data_dir, current_.at(id)->name());
  current_.erase(id);
  retired_[id] = path;
  ++retired_count_;
  if (log_) {
    log_(absl::StrCat("job ", id, " left memory to make room for job ", LogSafe(for_job),
                      ": its ranks showed no life for ", (now_ns - oldest) / 1'000'000'000,
                      " s (--job-retire-idle-ms); its journal stays at ", path,
                      ", and it is restored from it if a rank of it declares itself"));
  }
  return true;
}

absl::StatusOr<std::unique_ptr<JobState>> JobRegistry::NewJobLocked(const v1::RankDeclaration& decl,
                                                                    int64_t now_ns) {
  if (auto retired = retired_.find(decl.job()); retired != retired_.end()) {
    JournalOpenInfo info;
    absl::StatusOr<std::unique_ptr<JobState>> job =
        JobState::Restore(retired->second, options_, metrics_, &info, now_ns);
    if (absl::IsDataLoss(job.status())) {
      job = JobState::Salvage(retired->second, decl, options_, metrics_, &info, now_ns);
    }
    if (job.ok()) {
      // A restore reserves its memory anyway (a restart never refuses a job it held): a job
      // coming back must fit as a new one would, idle ones leaving to make room.
      MemoryBudget* budget = options_.budget;
      while (budget != nullptr && budget->used() > budget->total() &&
             RetireIdleLocked(now_ns, decl.job())) {
      }
      if (budget != nullptr && budget->used() > budget->total()) {
        return NoRoom(
            absl::StrCat("job ", decl.job(), " (restored from ", retired->second, ") needs about ",
                         (*job)->reserved_bytes() >> 20,
                         " MB of coordinator memory, more than is left (--max-memory-mb)"),
            (*job)->reserved_bytes());
      }
      if (log_) {
        log_(absl::StrCat("restored job ", (*job)->name(), " from ", retired->second,
                          " (it had left memory): ", info.Describe()));
      }
      retired_.erase(retired);
      return job;
    }
    if (!absl::IsNotFound(job.status())) return job.status();
    retired_.erase(retired);  // its journal was removed: the job starts a new one
  }
  auto salvage = salvage_.find(decl.job());
  if (salvage == salvage_.end()) return JobState::Create(decl, options_, metrics_);
  JournalOpenInfo info;
  absl::StatusOr<std::unique_ptr<JobState>> job =
      JobState::Salvage(salvage->second, decl, options_, metrics_, &info, now_ns);
  if (job.ok()) {
    if (log_) {
      log_(absl::StrCat("salvaged job ", decl.job(), " from ", salvage->second,
                        " under the declaration of rank ", decl.rank(), ": ", info.Describe()));
    }
    salvage_.erase(salvage);
  }
  return job;
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
      for (VerdictObserver* o : options_.observers) o->OnJobRetired(runs[i]->name());
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
    const int64_t now = shm::MonotonicNowNs();
    // A declaration that could never make a job retires none to make room for it.
    if (retired_.count(decl.job()) == 0 && salvage_.count(decl.job()) == 0) {
      if (absl::StatusOr<StageSchema> s = JobState::CheckNewJob(decl, options_); !s.ok()) {
        return s.status();
      }
    }
    if (static_cast<int32_t>(current_.size()) >= options_.limits.max_jobs &&
        !RetireIdleLocked(now, decl.job())) {
      return NoRoom(absl::StrCat("job \"", LogSafe(decl.job()),
                                 "\" refused: this coordinator already holds ", current_.size(),
                                 " jobs (--max-jobs), none of them idle for --job-retire-idle-ms (",
                                 options_.limits.job_retire_idle_ms / 1000, " s) and unused"));
    }
    absl::StatusOr<std::unique_ptr<JobState>> job = NewJobLocked(decl, now);
    while (IsNoRoom(job.status()) && RoomCanBeMadeLocked(NoRoomBytes(job.status()), now) &&
           RetireIdleLocked(now, decl.job())) {
      job = NewJobLocked(decl, now);
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

std::string JobRegistry::RetiredJournal(const std::string& id) const {
  MutexLock lock(&mu_);
  auto it = retired_.find(id);
  return it == retired_.end() ? "" : it->second;
}

uint64_t JobRegistry::retired_count() const {
  MutexLock lock(&mu_);
  return retired_count_;
}

std::vector<std::string> JobRegistry::PendingSalvage() const {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [job, path] : salvage_) out.push_back(job);
  return out;
}

}  // namespace stagefrontier
