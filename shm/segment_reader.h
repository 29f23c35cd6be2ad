// The consumer side of a segment (used by the sidecar): drains every slot's ring, validates
// each record, converts it to stage durations, and keeps per-slot counters.
//
// A record is delivered only if its sequence number is the one its position implies (else it
// is counted `torn` when its writer died mid-record, `invalid` otherwise), its stage count
// matches the slot's schema, its step number goes forward, and it passes CheckStepRecord
// (shm/record_limits.h: the same rules the stub applies before publishing and the coordinator
// after receiving). Missing step numbers are counted as `gap_steps`; with
// every step recorded they equal the writer's `dropped_by_writer`.
//
// Threading contract: one reader per segment (MappedSegment::LockForReading enforces it
// across processes); a SegmentReader object is used by one thread.
//
//   SegmentReader reader(mapped->view());
//   reader.Drain([](const DrainedStep& s) { Send(s.rank, s.step, s.DurationsNs()); });
//   for (const SlotReport& r : reader.Reports()) { ... r.torn, r.invalid ... }
#ifndef STAGEFRONTIER_SHM_SEGMENT_READER_H_
#define STAGEFRONTIER_SHM_SEGMENT_READER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shm/record_limits.h"
#include "shm/segment_view.h"
#include "shm/slot_ownership.h"

namespace stagefrontier::shm {

struct DrainedStep {
  uint32_t local_rank = 0;
  int32_t rank = 0;
  uint64_t generation = 0;  // which owner of the slot wrote it
  int64_t step = 0;
  int64_t end_ns = 0;
  uint32_t flags = 0;
  std::vector<int64_t> boundaries_ns;  // step start, then the end of each stage
  uint64_t cursor_after = 0;           // ring position just past this record (for Commit)

  // Stage durations: boundaries_ns[k+1] - boundaries_ns[k].
  std::vector<int64_t> DurationsNs() const;
};

struct SlotReport {
  uint32_t local_rank = 0;
  uint32_t state = 0;  // v1::SlotState
  int32_t rank = -1;
  int32_t world_size = 0;
  uint32_t owner_pid = 0;
  OwnerHealth owner = OwnerHealth::kNone;
  int64_t heartbeat_age_ns = 0;
  uint64_t generation = 0;
  std::vector<std::pair<std::string, uint8_t>> stages;
  // The owner's rank layout (pipeline stage and count, tensor rank and size), judged once per
  // owner generation with the schema: none (pipeline_stages 0) when the owner declared none or
  // declared an inconsistent one (pipeline_stage >= pipeline_stages, tensor_size 0,
  // tensor_rank >= tensor_size), which is also counted `invalid` with a message.
  SlotLayout layout;
  uint64_t records_read = 0;       // delivered to the sink
  uint64_t dropped_by_writer = 0;  // the stub found the ring full
  uint64_t torn = 0;               // a writer died mid-record
  uint64_t invalid = 0;            // failed validation (including corrupt cursors)
  uint64_t gap_steps = 0;          // step numbers never seen
  uint64_t resynced = 0;           // a step number out of sequence was skipped over
  uint64_t pending = 0;            // published, not yet read
  // Clock trouble (detector health): a stage or a step going backwards against the previous
  // one, or a step ending more than kClockAheadToleranceNs after the reader's own clock
  // (stub and sidecar share the node's CLOCK_MONOTONIC). Such records are still delivered
  // when otherwise valid; the counters tell the coordinator its timing is suspect.
  uint64_t clock_backwards = 0;
  uint64_t clock_ahead = 0;
  std::string last_error;  // the most recent problem, empty if none
};

inline constexpr int64_t kClockAheadToleranceNs = 1'000'000'000;

struct ReaderOptions {
  int64_t stale_after_ns = kDefaultStaleAfterNs;
  // true: Drain hands records back to the writer as soon as they are delivered. false: Drain
  // reads ahead and records stay in the ring (the writer cannot reuse them) until Commit; a
  // reader that dies before committing leaves them for the next reader (the sidecar commits
  // only what the coordinator acknowledged).
  bool commit_on_drain = true;
  // When set, asked before each complete record is read, with the time the stub ended that
  // step: true leaves it and the rest of the slot's records for a later Drain (the sidecar
  // waits a little for the probe's intervals of that step).
  std::function<bool(uint32_t local_rank, int64_t end_ns)> hold;
  // Called for every torn or invalid record and corrupt slot, with a message naming the slot.
  std::function<void(uint32_t local_rank, const std::string& message)> on_error;
};

class SegmentReader {
 public:
  explicit SegmentReader(const SegmentView& view, ReaderOptions options = {});

  // Drains at most `max_per_slot` records from every slot, calling `sink` for each valid one
  // (the DrainedStep is reused between calls). Returns the number delivered. Never fails:
  // problems are counted in the slot's report.
  size_t Drain(const std::function<void(const DrainedStep&)>& sink,
               size_t max_per_slot = std::numeric_limits<size_t>::max());

  // Reads every slot's identity and schema without consuming records (Drain does it too).
  void RefreshSchemas();

  // With commit_on_drain = false: hands the records of slot `local_rank` before `cursor` (a
  // DrainedStep::cursor_after) back to the writer. Cursors behind the committed one or beyond
  // what was read are ignored.
  void Commit(uint32_t local_rank, uint64_t cursor);
  // Where the next Drain starts reading slot `local_rank` (read-ahead or committed cursor).
  uint64_t ReadAhead(uint32_t local_rank) const;
  // Forgets what was read ahead: the next Drain starts again at every slot's committed cursor
  // (after the coordinator lost what was sent and not acknowledged).
  void Rewind();

  // Counters and identity of slot `local_rank` (< slot count) or of every slot.
  SlotReport Report(uint32_t local_rank) const;
  std::vector<SlotReport> Reports() const;

  const SegmentView& view() const { return view_; }

 private:
  struct SlotState {
    uint64_t generation = 0;
    bool schema_ok = false;
    bool schema_failed = false;  // this generation's schema was judged bad
    std::vector<std::pair<std::string, uint8_t>> stages;
    uint64_t schema_hash = 0;
    SlotLayout layout;             // this generation's, none unless declared and consistent
    uint32_t step_generation = 0;  // the owner whose steps last_step counts
    bool have_step = false;
    int64_t last_step = 0;
    bool have_previous = false;  // previous_step holds the step delivered before last_step
    int64_t previous_step = 0;
    uint64_t resynced = 0;
    bool reading_ahead = false;
    uint64_t next = 0;  // read-ahead cursor (commit_on_drain = false)
    uint64_t records_read = 0;
    uint64_t torn = 0;
    uint64_t invalid = 0;
    uint64_t gap_steps = 0;
    uint64_t clock_backwards = 0;
    uint64_t clock_ahead = 0;
    int64_t last_end_ns = -1;  // end of the previous record of step_generation
    std::string last_error;
  };
  void RefreshSchema(uint32_t local_rank, SlotState& st);
  void Fail(uint32_t local_rank, SlotState& st, uint64_t* counter, std::string message);
  // Validates record `cursor` of a slot into scratch_; returns false (counted) if it fails.
  bool Decode(uint32_t local_rank, SlotState& st, uint64_t cursor);
  // Decode's steps. The record's sequence, schema and stage count: the count, or nothing
  // (counted and said) when the record cannot be used.
  std::optional<uint32_t> CheckHeader(uint32_t local_rank, SlotState& st, const v1::StepRecord& rec,
                                      uint64_t cursor);
  // Clocks that went backwards or ahead: counted, the record still goes on.
  void CheckClocks(uint32_t local_rank, SlotState& st, int64_t step, int64_t end_ns);
  // The rank's step numbering: gaps counted, one odd step number resynchronized; false for a
  // duplicated or out-of-order step.
  bool AdvanceStep(uint32_t local_rank, SlotState& st, int64_t step);

  SegmentView view_;
  ReaderOptions options_;
  std::vector<SlotState> slots_;
  DrainedStep scratch_;
  int64_t drain_now_ns_ = 0;  // the reader's clock at the start of the current Drain
};

}  // namespace stagefrontier::shm

#endif  // STAGEFRONTIER_SHM_SEGMENT_READER_H_
