#include "daemon/sidecar/segment_drainer.h"

#include <dirent.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/sidecar/owner_signal.h"
#include "daemon/wire/packed_steps.h"
#include "daemon/wire/rank_steps.h"
#include "shm/monotonic_clock.h"
#include "shm/open_stage.h"
#include "shm/slot_ownership.h"

namespace stagefrontier {
namespace {

// The rank's open stage, from the slot's bytes (untrusted): a stage outside the slot's
// schema, or a read torn at every try, leaves open_known false.
void FillOpenStage(const shm::v1::SlotHeader& slot, const shm::SlotReport& r, int64_t now,
                   v1::SlotHealth* h) {
  shm::OpenStage o;
  if (!shm::ReadOpenStage(slot, &o) || !o.known()) return;
  if (o.in_stage() && o.stage() >= r.stages.size()) return;
  h->set_open_known(true);
  h->set_open_step(o.step);
  h->set_open_stage(o.in_stage() ? r.stages[o.stage()].first : "");
  h->set_open_age_ns(shm::HeartbeatAgeNs(now, o.since_ns));
}

}  // namespace

SegmentDrainer::SegmentDrainer(DrainerOptions options, Log log)
    : options_(std::move(options)), log_(std::move(log)) {}

absl::Status SegmentDrainer::Start() {
  if (options_.create_job.empty()) return absl::OkStatus();
  shm::SegmentOptions o;
  o.dir = options_.dir;
  o.job_id = options_.create_job;
  o.slot_count = options_.create_slots;
  o.ring_capacity = options_.create_ring_capacity;
  o.group = options_.group;
  absl::StatusOr<std::unique_ptr<shm::MappedSegment>> seg = shm::MappedSegment::OpenOrCreate(o);
  if (!seg.ok()) return seg.status();
  if (log_) {
    log_(absl::StrCat((*seg)->created() ? "created" : "found", " segment ", (*seg)->path()));
  }
  return absl::OkStatus();
}

size_t SegmentDrainer::segment_count() const {
  size_t n = 0;
  for (const auto& a : segments_) n += a->quarantined ? 0 : 1;
  return n;
}

void SegmentDrainer::QuarantineDamaged() {
  for (auto& a : segments_) {
    if (a->quarantined) continue;
    const absl::Status s = a->mapped->CheckIntact();
    if (s.ok()) continue;
    // Detach: what it holds cannot be trusted, and a truncated file is already gone. A file
    // still at its path is renamed aside (kept for inspection; the name no longer matches
    // segments), so that the trainers' next start creates a fresh one there.
    const std::string& path = a->mapped->path();
    struct stat st {};
    std::string aside;
    if (::lstat(path.c_str(), &st) == 0 && FileId{st.st_dev, st.st_ino} == a->mapped->file_id()) {
      aside = absl::StrCat(path, ".quarantined-", ::time(nullptr));
      if (::rename(path.c_str(), aside.c_str()) != 0) aside.clear();
    }
    if (log_) {
      log_(absl::StrCat("quarantined segment of job ", a->job, ": ", s.message(),
                        "; its records are no longer read",
                        aside.empty() ? "" : absl::StrCat(" (moved aside to ", aside, ")")));
    }
    quarantined_files_.insert(a->mapped->file_id());
    known_paths_.erase(a->mapped->path());
    a->quarantined = true;
    a->probe_steps.reset();
    a->probes.reset();
    a->reader.reset();
    a->mapped.reset();
    ++quarantined_;
  }
}

void SegmentDrainer::OnReaderError(Attached& a, uint32_t local_rank, const std::string& message) {
  ++reader_errors_;
  if (local_rank >= a.error_logged_ns.size()) return;
  const int64_t now = shm::MonotonicNowNs();
  if (a.error_logged_ns[local_rank] != 0 &&
      now - a.error_logged_ns[local_rank] < options_.error_log_interval_ns) {
    ++a.errors_unlogged[local_rank];
    return;
  }
  if (log_) {
    std::string line = absl::StrCat("job ", a.job, ": ", message);
    if (a.errors_unlogged[local_rank] > 0) {
      absl::StrAppend(&line, " (and ", a.errors_unlogged[local_rank],
                      " more errors on this slot since the last line)");
    }
    log_(line);
  }
  a.error_logged_ns[local_rank] = now;
  a.errors_unlogged[local_rank] = 0;
}

void SegmentDrainer::Rescan() {
  QuarantineDamaged();
  DIR* dir = ::opendir(options_.dir.c_str());
  if (dir == nullptr) {
    if (!dir_refused_ && log_) {
      log_(
          absl::StrCat("cannot open segment directory ", options_.dir, ": ", std::strerror(errno)));
    }
    dir_refused_ = true;
    return;
  }
  dir_refused_ = false;
  std::vector<std::string> found;
  std::set<std::string> listed;  // to forget refusals of files gone since
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (!absl::StartsWith(name, "stagefrontier.") || !absl::EndsWith(name, ".seg")) continue;
    const std::string path = absl::StrCat(options_.dir, "/", name);
    if (!refused_.empty()) listed.insert(path);
    if (!options_.job.empty() && path != shm::SegmentPath(options_.dir, options_.job)) continue;
    const bool skipped = std::any_of(
        options_.skip_jobs.begin(), options_.skip_jobs.end(),
        [&](const std::string& j) { return path == shm::SegmentPath(options_.dir, j); });
    if (skipped) continue;
    if (known_paths_.count(path) == 0) found.push_back(path);
  }
  ::closedir(dir);
  // A refusal is remembered per file name, to say it once; names a trainer creates and removes
  // must not pile up in the (root) sidecar.
  std::erase_if(refused_, [&](const auto& entry) { return listed.count(entry.first) == 0; });
  std::sort(found.begin(), found.end());
  for (const std::string& path : found) Attach(path);
}

void SegmentDrainer::Attach(const std::string& path) {
  struct stat st {};
  const FileId id = ::lstat(path.c_str(), &st) == 0 ? FileId{st.st_dev, st.st_ino} : FileId{};
  if (quarantined_files_.count(id) > 0) return;  // said when it was quarantined
  absl::StatusOr<std::unique_ptr<shm::MappedSegment>> seg = shm::MappedSegment::Attach(path);
  absl::Status s = seg.ok() ? (*seg)->LockForReading() : seg.status();
  if (s.ok() && path != shm::SegmentPath(options_.dir, (*seg)->view().job_id())) {
    // The file name is what --job, the skip list and the directory's owner go by: a segment
    // whose header names another job would have its writer speak for that job.
    s = absl::PermissionDeniedError(absl::StrCat("its header names job \"", (*seg)->view().job_id(),
                                                 "\", not the job of its file name"));
  }
  if (!s.ok()) {
    // Retried every rescan (a segment may still be being created), said once per file.
    auto it = refused_.find(path);
    if ((it == refused_.end() || it->second != id) && log_) {
      log_(absl::StrCat("not draining ", path, ": ", s.message()));
    }
    refused_[path] = id;
    return;
  }
  refused_.erase(path);
  if (!(*seg)->warning().empty() && log_) log_(absl::StrCat("warning: ", (*seg)->warning()));
  known_paths_.insert(path);
  segments_.push_back(std::make_unique<Attached>());
  Attached& a = *segments_.back();
  a.job = (*seg)->view().job_id();
  a.mapped = *std::move(seg);
  a.error_logged_ns.assign(a.mapped->view().slot_count(), 0);
  a.errors_unlogged.assign(a.mapped->view().slot_count(), 0);
  shm::ReaderOptions ro;
  ro.stale_after_ns = options_.stale_after_ns;
  ro.commit_on_drain = false;
  ro.on_error = [this, &a](uint32_t local_rank, const std::string& message) {
    OnReaderError(a, local_rank, message);
  };
  a.probes = std::make_unique<shm::ProbeRingReader>(a.mapped->view(), ro.on_error);
  a.probe_steps = std::make_unique<shm::ProbeStepMatcher>(a.mapped->view().slot_count());
  // Wait briefly for the probe to publish a step's collectives (it resolves GPU events a
  // little after the fact); without a live probe on the slot, never wait.
  ro.hold = [probes = a.probes.get(), max_hold = options_.probe_hold_ns](uint32_t local_rank,
                                                                         int64_t end_ns) {
    if (probes->ResolvedThrough(local_rank) >= end_ns) return false;
    if (shm::MonotonicNowNs() - end_ns >= max_hold) return false;
    return probes->Fed(local_rank);
  };
  a.reader = std::make_unique<shm::SegmentReader>(a.mapped->view(), std::move(ro));
  a.declared_generation.assign(a.mapped->view().slot_count(), 0);
  a.control.assign(a.mapped->view().slot_count(), shm::ControlRequest{});
  a.capture_seen.assign(a.mapped->view().slot_count(), {0, shm::v1::kCaptureNone, 0});
  a.open_passed.assign(a.mapped->view().slot_count(), {0, 0});
  a.dump_asked_ns.assign(a.mapped->view().slot_count(), 0);
  if (log_) {
    log_(absl::StrCat("draining job ", a.job, " from ", path, " (", a.mapped->view().slot_count(),
                      " slots of ", a.mapped->view().ring_capacity(), " records)"));
  }
}

size_t SegmentDrainer::Drain(v1::StepBatch* batch, std::vector<CommitPoint>* commits,
                             size_t max_records) {
  size_t taken = 0;
  for (size_t si = 0; si < segments_.size() && taken < max_records; ++si) {
    Attached& a = *segments_[si];
    if (a.quarantined) continue;
    // Per slot: the RankSteps being filled and its encoder.
    std::map<uint32_t, std::pair<v1::RankSteps*, wire::PackedStepsEncoder>> open;
    std::vector<uint64_t> before(a.mapped->view().slot_count());
    for (uint32_t i = 0; i < before.size(); ++i) before[i] = a.reader->ReadAhead(i);
    // Passes with a per-slot quota, so that one busy rank cannot crowd out the others.
    for (size_t got = 1; got > 0 && taken < max_records;) {
      const size_t room = max_records - taken;
      const size_t per_slot =
          std::max<size_t>(1, room / std::max<uint32_t>(1, a.mapped->view().slot_count()));
      got = a.reader->Drain(
          [&](const shm::DrainedStep& s) {
            auto it = open.find(s.local_rank);
            if (it == open.end() || it->second.first->rank() != s.rank) {
              if (a.declared_generation[s.local_rank] != s.generation) {
                const shm::SlotReport r = a.reader->Report(s.local_rank);
                v1::RankDeclaration* d = batch->add_declarations();
                d->set_job(a.job);
                d->set_rank(s.rank);
                d->set_world_size(r.world_size);
                d->set_local_rank(static_cast<int32_t>(s.local_rank));
                d->set_owner_generation(s.generation);
                for (const auto& [name, kind] : r.stages) {
                  v1::Stage* st = d->add_stages();
                  st->set_name(name);
                  st->set_kind(static_cast<v1::StageKind>(kind));
                }
                // Only a declared (and per-slot consistent) layout: none leaves it unset.
                if (r.layout.declared()) {
                  v1::RankLayout* l = d->mutable_layout();
                  l->set_pipeline_stage(r.layout.pipeline_stage);
                  l->set_pipeline_stages(r.layout.pipeline_stages);
                  l->set_tensor_rank(r.layout.tensor_rank);
                  l->set_tensor_size(r.layout.tensor_size);
                }
                a.declared_generation[s.local_rank] = s.generation;
              }
              if (it != open.end()) {  // a new owner with another rank: close the old message
                v1::RankSteps* m = it->second.first;
                m->set_base_step(it->second.second.base_step());
                m->set_count(it->second.second.count());
                m->set_packed(it->second.second.bytes());
                open.erase(it);
              }
              v1::RankSteps* m = batch->add_steps();
              m->set_job(a.job);
              m->set_rank(s.rank);
              it = open.emplace(s.local_rank,
                                std::make_pair(m, wire::PackedStepsEncoder(static_cast<uint32_t>(
                                                      s.boundaries_ns.size() - 1))))
                       .first;
            }
            int64_t d[shm::v1::kMaxStages];
            for (size_t k = 1; k < s.boundaries_ns.size(); ++k) {
              d[k - 1] = s.boundaries_ns[k] - s.boundaries_ns[k - 1];
            }
            it->second.second.Add(s.step, d, s.flags);
            AttachProbes(a, s, it->second.first);
          },
          per_slot);
      taken += got;
    }
    for (auto& [local_rank, entry] : open) {
      wire::FillRankSteps(entry.second, entry.first);
    }
    // Commit up to the read-ahead cursor, invalid records included: they will not improve.
    for (uint32_t i = 0; i < before.size(); ++i) {
      const uint64_t after = a.reader->ReadAhead(i);
      if (after != before[i]) commits->push_back(CommitPoint{si, i, after});
    }
  }
  return taken;
}

void SegmentDrainer::AttachProbes(Attached& a, const shm::DrainedStep& step, v1::RankSteps* out) {
  a.probe_steps->Pull(*a.probes, step.local_rank);
  const int64_t b0 = step.boundaries_ns.front();
  a.probe_steps->Match(step.local_rank, b0, step.end_ns, [&](const shm::ProbeInterval& p) {
    v1::CollectiveInterval* c = out->add_collectives();
    c->set_step(step.step);
    c->set_op(p.op);
    c->set_bytes(p.bytes);
    c->set_comm_id(p.comm_id);
    c->set_collective_seq(p.collective_seq);
    c->set_call_offset_ns(p.call_ns - b0);
    c->set_start_offset_ns(p.start_ns - b0);
    c->set_end_offset_ns(p.end_ns - b0);
    c->set_in_group((p.flags & shm::v2::kProbeInGroup) != 0);
  });
}

void SegmentDrainer::Commit(const std::vector<CommitPoint>& commits) {
  for (const CommitPoint& c : commits) {
    if (c.segment < segments_.size() && !segments_[c.segment]->quarantined) {
      segments_[c.segment]->reader->Commit(c.local_rank, c.cursor);
    }
  }
}

void SegmentDrainer::Rewind() {
  for (auto& seg : segments_) {
    if (seg->quarantined) continue;
    Attached& a = *seg;
    a.reader->Rewind();
    std::fill(a.declared_generation.begin(), a.declared_generation.end(), 0);
  }
}

void SegmentDrainer::FillHealth(v1::Health* out, int64_t now_ns) const {
  const int64_t now = now_ns != 0 ? now_ns : shm::MonotonicNowNs();
  for (const auto& seg : segments_) {
    if (seg->quarantined) continue;
    const Attached& a = *seg;
    for (const shm::SlotReport& r : a.reader->Reports()) {
      if (r.state == shm::v1::kSlotFree) continue;
      v1::SlotHealth* h = out->add_slots();
      h->set_job(a.job);
      h->set_rank(r.rank);
      h->set_local_rank(static_cast<int32_t>(r.local_rank));
      h->set_owner_pid(r.owner_pid);
      h->set_owner(shm::OwnerHealthName(r.owner));
      h->set_records_read(r.records_read);
      h->set_dropped_by_writer(r.dropped_by_writer);
      h->set_torn(r.torn);
      h->set_invalid(r.invalid);
      h->set_gap_steps(r.gap_steps);
      h->set_pending(r.pending);
      h->set_last_error(r.last_error);
      const shm::ProbeRingReport p = a.probes->Report(r.local_rank);
      h->set_probe_backend(p.producer_pid != 0 ? shm::v2::ProbeBackendName(p.backend) : "");
      h->set_probe_intervals(a.probe_steps->matched(r.local_rank));
      h->set_probe_dropped(p.dropped_full + p.dropped_unresolved);
      h->set_probe_invalid(p.invalid);
      h->set_probe_unmatched(a.probe_steps->unmatched(r.local_rank));
      h->set_clock_backwards(r.clock_backwards);
      h->set_clock_ahead(r.clock_ahead);
      const shm::v1::SlotHeader& slot = a.mapped->view().slot(r.local_rank);
      const uint32_t answer = slot.selftest_state.load(std::memory_order_acquire);
      if (answer != shm::v1::kSelfTestNone) {
        h->set_selftest_first_step(
            slot.selftest_answered_first_step.load(std::memory_order_acquire));
        h->set_selftest_state(answer);
        h->set_selftest_steps_done(slot.selftest_steps_done.load(std::memory_order_relaxed));
      }
      h->set_capture_handler(slot.capture_handler.load(std::memory_order_relaxed) != 0);
      h->set_layout_source(shm::v1::LayoutSourceName(slot.layout_source));
      // The stub stores "none" first and the state last: a state that changed while the
      // fields were read waits for the next report.
      const uint32_t capture = slot.capture_state.load(std::memory_order_acquire);
      const int64_t capture_first =
          slot.capture_answered_first_step.load(std::memory_order_acquire);
      const uint32_t capture_failure = slot.capture_failure.load(std::memory_order_acquire);
      const uint64_t capture_bytes = slot.capture_bytes.load(std::memory_order_acquire);
      if (capture != shm::v1::kCaptureNone &&
          slot.capture_state.load(std::memory_order_acquire) == capture) {
        h->set_capture_first_step(capture_first);
        h->set_capture_failure(capture_failure);
        h->set_capture_bytes(capture_bytes);
        h->set_capture_state(capture);
      }
      // A dead owner's last open stage is where it died (the stall verdict's "dead"); a silent
      // one (another PID namespace, no step for a minute) may be the hung rank itself; an owner
      // that released the slot on an uncaught exception left it where it raised.
      const uint32_t exit_reason = slot.exit_reason.load(std::memory_order_acquire);
      h->set_exit_reason(shm::v1::ExitReasonName(exit_reason));
      if (r.owner != shm::OwnerHealth::kNone || exit_reason != shm::v1::kExitNotSaid) {
        FillOpenStage(slot, r, now, h);
      }
    }
  }
}

bool SegmentDrainer::OpenStagesPassed(int64_t threshold_ns, int64_t now_ns, bool* open_long) {
  if (open_long != nullptr) *open_long = false;
  if (threshold_ns <= 0) return false;
  const int64_t now = now_ns != 0 ? now_ns : shm::MonotonicNowNs();
  bool passed = false;
  for (auto& seg : segments_) {
    if (seg->quarantined) continue;
    for (uint32_t i = 0; i < seg->open_passed.size(); ++i) {
      const shm::v1::SlotHeader& slot = seg->mapped->view().slot(i);
      if (slot.state.load(std::memory_order_acquire) != shm::v1::kSlotActive) continue;
      shm::OpenStage o;
      if (!shm::ReadOpenStage(slot, &o, /*attempts=*/4) || !o.known()) continue;
      if (shm::HeartbeatAgeNs(now, o.since_ns) < threshold_ns) continue;
      if (open_long != nullptr) *open_long = true;
      const std::pair<uint64_t, uint64_t> key{slot.generation.load(std::memory_order_relaxed),
                                              o.seq};
      if (seg->open_passed[i] == key) continue;
      seg->open_passed[i] = key;
      passed = true;
    }
  }
  return passed;
}

bool SegmentDrainer::CaptureAnswersChanged() {
  bool changed = false;
  for (auto& seg : segments_) {
    if (seg->quarantined) continue;
    for (uint32_t i = 0; i < seg->capture_seen.size(); ++i) {
      const shm::v1::SlotHeader& slot = seg->mapped->view().slot(i);
      const std::tuple<int64_t, uint32_t, uint32_t> now{
          slot.capture_answered_first_step.load(std::memory_order_acquire),
          slot.capture_state.load(std::memory_order_acquire),
          slot.capture_handler.load(std::memory_order_acquire)};
      if (now != seg->capture_seen[i]) {
        seg->capture_seen[i] = now;
        changed = true;
      }
    }
  }
  return changed;
}

v1::ControlAck SegmentDrainer::ApplyControl(const v1::ControlRequest& request) {
  v1::ControlAck ack;
  ack.set_request_id(request.request_id());
  ack.set_job(request.job());
  ack.set_rank(request.rank());
  const uint32_t sets =
      request.sets() == 0 ? shm::kControlSetsTrace | shm::kControlSetsSelfTest : request.sets();
  // A stack dump is rank-targeted and travels outside the control block: a request that asks
  // only for one leaves the block (and its seq) as it is.
  const bool dumps = request.rank() >= 0 && (sets & shm::kControlSetsStacks) != 0;
  const bool posts = request.rank() < 0 || (sets & ~shm::kControlSetsStacks) != 0;
  int matched = 0;
  int signalled = 0;
  std::vector<std::string> refusals;
  for (auto& seg : segments_) {
    if (seg->quarantined || seg->job != request.job()) continue;
    Attached& a = *seg;
    for (uint32_t i = 0; i < a.mapped->view().slot_count(); ++i) {
      shm::v1::SlotHeader& slot = a.mapped->view().slot(i);
      const uint32_t state = slot.state.load(std::memory_order_acquire);
      if (state != shm::v1::kSlotActive) continue;
      if (request.rank() >= 0 && slot.rank != request.rank()) continue;
      ++matched;
      if (posts) {
        shm::ControlRequest& c = a.control[i];
        c.paused = request.paused();
        c.sample_every = std::max<uint32_t>(1, request.sample_every());
        // A capture and a self-test of the same rank share the slot's control block: each
        // request changes only what it sets, so that one never cancels the other.
        if (request.rank() >= 0 && (sets & shm::kControlSetsTrace) != 0) {
          c.trace_first_step = request.trace_first_step();
          c.trace_last_step = request.trace_last_step();
        }
        if (request.rank() >= 0 && (sets & shm::kControlSetsSelfTest) != 0) {
          c.selftest_stage = request.selftest_stage();
          c.selftest_delay_us = request.selftest_delay_us();
          c.selftest_first_step = request.selftest_first_step();
          c.selftest_last_step = request.selftest_last_step();
        }
        c.request_id = request.request_id();
        shm::PostControl(slot, c);
      }
      if (dumps) {
        const absl::Status s = AskStackDump(a, i, request.stacks_capture_id());
        if (s.ok()) {
          ++signalled;
        } else {
          refusals.push_back(
              absl::StrCat("rank ", request.rank(), ": not signalled: ", s.message()));
        }
      }
    }
  }
  ack.set_applied(matched > 0 && (!dumps || signalled > 0));
  if (matched == 0) {
    ack.set_error(absl::StrCat("no active slot of job ", request.job(),
                               request.rank() >= 0 ? absl::StrCat(" rank ", request.rank()) : "",
                               " on this node"));
  } else if (!refusals.empty()) {
    ack.set_error(absl::StrJoin(refusals, "; "));
  }
  return ack;
}

absl::Status SegmentDrainer::AskStackDump(Attached& a, uint32_t local_rank, uint64_t capture_id) {
  shm::v1::SlotHeader& slot = a.mapped->view().slot(local_rank);
  const int64_t now = shm::MonotonicNowNs();
  int64_t& last = a.dump_asked_ns[local_rank];
  if (last != 0 && now - last < kStackDumpIntervalNs) {
    // The id is not stored either: a dump the last attempt started may still be being written,
    // and would be filed under this newer id, the older capture getting no file.
    ++stack_dumps_refused_;  // not logged: a flood of requests must not flood the log either
    return absl::ResourceExhaustedError(absl::StrCat(
        "a stack dump was asked of it less than ", kStackDumpIntervalNs / 1'000'000'000, " s ago"));
  }
  last = now;
  // The id before the signal: the trainer's handler reads it when the signal arrives (and a
  // request refused below still names the newest dump for a handler that runs anyway).
  slot.dump_request_id.store(capture_id, std::memory_order_release);
  absl::Status s;
  struct stat st {};
  if (::lstat(a.mapped->path().c_str(), &st) != 0 ||
      FileId{st.st_dev, st.st_ino} != a.mapped->file_id()) {
    s = absl::FailedPreconditionError("its segment file is no longer at its path");
  } else {
    // Everything in the slot is the trainer's user's to write: SignalSegmentUser checks it.
    OwnerSignalTarget t;
    t.pid = slot.owner_pid.load(std::memory_order_acquire);
    t.pid_ns = slot.owner_pid_ns.load(std::memory_order_relaxed);
    t.signal_number = static_cast<int>(slot.dump_signal.load(std::memory_order_relaxed));
    t.segment_uid = st.st_uid;
    t.segment_mode = st.st_mode & 07777;
    s = SignalSegmentUser(t);
    if (s.ok()) {
      ++stack_dumps_signalled_;
      if (log_) {
        log_(absl::StrCat("job ", a.job, " rank ", slot.rank, ": stack dump ", capture_id,
                          " asked of pid ", t.pid, " (signal ", t.signal_number, ")"));
      }
      return s;
    }
  }
  ++stack_dumps_refused_;
  if (log_) {
    log_(absl::StrCat("job ", a.job, " rank ", slot.rank, ": stack dump ", capture_id,
                      " not signalled: ", s.message()));
  }
  return s;
}

}  // namespace stagefrontier
