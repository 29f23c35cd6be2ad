// The sidecar's view of its node: every job segment in the segment directory, drained with
// read-ahead so that records leave the rings only once the coordinator acknowledged them
// (a sidecar killed in between leaves them for its successor, which re-sends; the
// coordinator drops the duplicates). Also relays control requests into the slots.
//
//   SegmentDrainer drainer({.dir = "/dev/shm"});
//   drainer.Rescan();                                  // picks up new segments
//   v1::StepBatch batch; std::vector<CommitPoint> commits;
//   if (drainer.Drain(&batch, &commits, 4096) > 0) send(batch);
//   ... on the batch's ack: drainer.Commit(commits);
//   ... on a new stream:    drainer.Rewind();          // re-send what was not acknowledged
#ifndef STAGEFRONTIER_DAEMON_SIDECAR_SEGMENT_DRAINER_H_
#define STAGEFRONTIER_DAEMON_SIDECAR_SEGMENT_DRAINER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "shm/control_channel.h"
#include "shm/probe_ring_reader.h"
#include "shm/probe_step_matcher.h"
#include "shm/segment_file.h"
#include "shm/segment_reader.h"
#include "stagefrontier/v1/ingest.pb.h"

namespace stagefrontier {

struct DrainerOptions {
  std::string dir = shm::kDefaultSegmentDir;
  std::string job;                  // only this job's segment; empty: every segment in dir
  std::set<std::string> skip_jobs;  // never these jobs' segments (another drainer serves them)
  // Create this job's segment at start if it does not exist (sidecar started first).
  std::string create_job;
  uint32_t create_slots = 8;
  uint32_t create_ring_capacity = 1024;
  std::string group;  // segment group when creating
  int64_t stale_after_ns = shm::kDefaultStaleAfterNs;
  // A step whose probe intervals may not all be published yet (the probe's resolved-through
  // time is behind the step's end) is held back at most this long.
  int64_t probe_hold_ns = 200'000'000;
  // At most one reader error line per slot in this interval (the rest are counted).
  int64_t error_log_interval_ns = 10'000'000'000;
};

// Where a batch ends in one slot's ring: committing it hands the records back to the stub.
struct CommitPoint {
  size_t segment = 0;
  uint32_t local_rank = 0;
  uint64_t cursor = 0;
};

class SegmentDrainer {
 public:
  using Log = std::function<void(const std::string&)>;
  explicit SegmentDrainer(DrainerOptions options, Log log = nullptr);

  // Creates options.create_job's segment if asked. Fails as MappedSegment::OpenOrCreate.
  [[nodiscard]] absl::Status Start();
  // Attaches segments that appeared in the directory since the last call. Segments that
  // cannot be used (another sidecar holds them, a newer layout, damage) are logged once per
  // file. Attached segments that were truncated, overwritten or replaced since are
  // quarantined: detached with one log line, counted, and never read again (a new file at
  // the same path is attached afresh).
  void Rescan();

  // Moves up to `max_records` new records into `batch` (with a declaration before a rank's
  // first steps on this stream) and the end of what it took per slot into `commits`.
  // Returns the number of records taken.
  size_t Drain(v1::StepBatch* batch, std::vector<CommitPoint>* commits, size_t max_records);
  void Commit(const std::vector<CommitPoint>& commits);
  // A new stream: forget declarations and read again from what was last committed.
  void Rewind();

  // Per-slot counters of every segment, for the coordinator, and where each rank whose owner
  // is alive is now: its open stage (docs/segment-format.md "Open stage") and that stage's age
  // at `now_ns` (0: now), on this node's monotonic clock.
  void FillHealth(v1::Health* out, int64_t now_ns = 0) const;
  // True if some active slot's open stage (or "between steps") became older than
  // `threshold_ns` since the last call: each open stage counts once. The streamer then sends
  // health at once. `open_long` (optional) says whether any active slot's open stage is older
  // than `threshold_ns` now, new or not (health_cadence.h: a stall may be forming). A few loads
  // per slot, no system call.
  bool OpenStagesPassed(int64_t threshold_ns, int64_t now_ns = 0, bool* open_long = nullptr);
  // True if a stub's capture answer or handler changed since the last call: the streamer then
  // sends a health report now, since a stub answers a capture, then the next one, in the same
  // slot, possibly within one regular report's interval, and a new trainer's handler should
  // count at the job's first verdict. A few loads per slot.
  bool CaptureAnswersChanged();
  // Posts a control request into the slots it names. The ack says whether any slot matched.
  // A stack dump (sets bit 2, shm::kControlSetsStacks, rank >= 0) stores stacks_capture_id in
  // the rank's slot (dump_request_id) and signals the slot's owner if it checks out
  // (owner_signal.h), at most once per slot every kStackDumpIntervalNs (a request within it is
  // refused and its id not stored); it leaves the control block alone. Such a request is applied
  // only if a signal was sent; each refusal is in the ack's error ("rank 3: not signalled: its
  // trainer names no dump signal (no dump handler)").
  v1::ControlAck ApplyControl(const v1::ControlRequest& request);

  // Segments being drained (quarantined ones not counted).
  size_t segment_count() const;
  // Segments quarantined since start.
  uint64_t quarantined() const { return quarantined_; }
  // Record and slot errors of the readers, all counted; only the first per slot in each
  // error_log_interval_ns is logged (a corrupt ring must not flood the log).
  uint64_t reader_errors() const { return reader_errors_; }
  // Stack dumps asked (ApplyControl): trainers signalled, and requests refused (the slot's
  // signal, pid or process did not check out, or one was asked of the slot within
  // kStackDumpIntervalNs).
  uint64_t stack_dumps_signalled() const { return stack_dumps_signalled_; }
  uint64_t stack_dumps_refused() const { return stack_dumps_refused_; }
  // Segment files refused and still listed (each said once).
  size_t refused_count() const { return refused_.size(); }

  // A stack dump is attempted (checks, then maybe a signal) at most once per slot in this
  // interval: a flood of requests is neither a flood of signals nor of /proc reads.
  static constexpr int64_t kStackDumpIntervalNs = 2'000'000'000;

 private:
  struct Attached {
    bool quarantined = false;  // kept in place: in-flight CommitPoints index segments_
    std::string job;
    std::unique_ptr<shm::MappedSegment> mapped;
    std::unique_ptr<shm::SegmentReader> reader;
    std::unique_ptr<shm::ProbeRingReader> probes;  // layout v2; no rings on v1
    std::unique_ptr<shm::ProbeStepMatcher> probe_steps;
    // Owner generation declared on this stream, per slot (0: none yet).
    std::vector<uint64_t> declared_generation;
    // Trace window requested for each slot, kept when job-wide requests change the rest.
    std::vector<shm::ControlRequest> control;
    // Error logging per slot: when the last line was logged and how many were not since.
    std::vector<int64_t> error_logged_ns;
    std::vector<uint64_t> errors_unlogged;
    // The capture answer last seen in each slot: (first step, state, handler).
    std::vector<std::tuple<int64_t, uint32_t, uint32_t>> capture_seen;
    // The open stage last reported as past the threshold, per slot: (generation, open_seq).
    std::vector<std::pair<uint64_t, uint64_t>> open_passed;
    // When a stack dump was last asked of each slot's owner (0: never), for the rate limit.
    std::vector<int64_t> dump_asked_ns;
  };
  using FileId = std::pair<uint64_t, uint64_t>;  // (device, inode)
  void Attach(const std::string& path);
  // Detaches segments that are no longer what was attached (MappedSegment::CheckIntact).
  void QuarantineDamaged();
  void OnReaderError(Attached& a, uint32_t local_rank, const std::string& message);
  // Stores `capture_id` in the slot's dump_request_id and signals its owner (owner_signal.h),
  // unless rate-limited (then nothing is stored). OK when signalled; otherwise why not, counted
  // and (but for the rate limit) logged.
  absl::Status AskStackDump(Attached& a, uint32_t local_rank, uint64_t capture_id);
  // Moves slot `local_rank`'s probe intervals called during `step` into `out`.
  void AttachProbes(Attached& a, const shm::DrainedStep& step, v1::RankSteps* out);

  DrainerOptions options_;
  Log log_;
  std::vector<std::unique_ptr<Attached>> segments_;
  std::set<std::string> known_paths_;  // paths of segments being drained
  // Files refused at attach, by path: logged again only when another file appears there.
  std::map<std::string, FileId> refused_;
  std::set<FileId> quarantined_files_;
  uint64_t quarantined_ = 0;
  uint64_t reader_errors_ = 0;
  uint64_t stack_dumps_signalled_ = 0;
  uint64_t stack_dumps_refused_ = 0;
  bool dir_refused_ = false;
};

}  // namespace stagefrontier

#endif  // STAGEFRONTIER_DAEMON_SIDECAR_SEGMENT_DRAINER_H_
