#include "shm/segment_reader.h"

#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "shm/monotonic_clock.h"

namespace stagefrontier::shm {
namespace {

bool PrintableName(const char* name, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    if (name[i] < 0x21 || name[i] > 0x7e) return false;
  }
  return len > 0;
}

}  // namespace

std::vector<int64_t> DrainedStep::DurationsNs() const {
  std::vector<int64_t> d;
  if (boundaries_ns.size() < 2) return d;
  d.reserve(boundaries_ns.size() - 1);
  for (size_t k = 1; k < boundaries_ns.size(); ++k) {
    d.push_back(boundaries_ns[k] - boundaries_ns[k - 1]);
  }
  return d;
}

SegmentReader::SegmentReader(const SegmentView& view, ReaderOptions options)
    : view_(view), options_(std::move(options)), slots_(view.slot_count()) {
  scratch_.boundaries_ns.reserve(v1::kMaxStages + 1);
}

void SegmentReader::Fail(uint32_t local_rank, SlotState& st, uint64_t* counter,
                         std::string message) {
  ++*counter;
  st.last_error = absl::StrCat("local rank ", local_rank, ": ", message);
  if (options_.on_error) options_.on_error(local_rank, st.last_error);
}

void SegmentReader::RefreshSchema(uint32_t local_rank, SlotState& st) {
  const v1::SlotHeader& slot = view_.slot(local_rank);
  const uint32_t state = slot.state.load(std::memory_order_acquire);
  const uint64_t generation = slot.generation.load(std::memory_order_relaxed);
  // Judged once per owner generation: a bad schema is counted and said once, not every poll.
  if ((st.schema_ok || st.schema_failed) && generation == st.generation) return;
  if (state != v1::kSlotActive && state != v1::kSlotReleased) return;
  st.generation = generation;
  st.stages.clear();
  st.schema_ok = false;
  st.schema_failed = true;  // until it passes below
  // The rank layout: copied out once, then judged (the trainer writes these bytes). A bad one
  // is counted and taken as none; the schema and the records are still good.
  SlotLayout layout;
  layout.pipeline_stage = slot.pipeline_stage;
  layout.pipeline_stages = slot.pipeline_stages;
  layout.tensor_rank = slot.tensor_rank;
  layout.tensor_size = slot.tensor_size;
  st.layout = SlotLayout{};
  if (layout.declared()) {
    if (ValidSlotLayout(layout)) {
      st.layout = layout;
    } else {
      Fail(local_rank, st, &st.invalid,
           absl::StrCat("slot rank layout (pipeline stage ", layout.pipeline_stage, " of ",
                        layout.pipeline_stages, ", tensor rank ", layout.tensor_rank, " of ",
                        layout.tensor_size, ") is inconsistent: taken as none declared"));
    }
  }
  const uint32_t count = slot.stage_count;
  if (count == 0 || count > v1::kMaxStages) {
    Fail(local_rank, st, &st.invalid, absl::StrCat("slot schema has ", count, " stages"));
    return;
  }
  for (uint32_t k = 0; k < count; ++k) {
    char name[v1::kStageNameBytes];
    std::memcpy(name, slot.stages[k].name, sizeof(name));
    const size_t len = strnlen(name, sizeof(name));
    const uint8_t kind = slot.stages[k].kind;
    if (len == sizeof(name) || !PrintableName(name, len) || kind > v1::kMaxStageKind) {
      Fail(local_rank, st, &st.invalid, absl::StrCat("slot schema stage ", k, " is corrupt"));
      st.stages.clear();
      return;
    }
    st.stages.emplace_back(std::string(name, len), kind);
  }
  st.schema_hash = SchemaHash(st.stages);
  if (st.schema_hash != slot.schema_hash) {
    Fail(local_rank, st, &st.invalid, "slot schema does not match its hash");
    st.stages.clear();
    return;
  }
  st.schema_ok = true;
  st.schema_failed = false;
}

std::optional<uint32_t> SegmentReader::CheckHeader(uint32_t local_rank, SlotState& st,
                                                   const v1::StepRecord& rec, uint64_t cursor) {
  const uint64_t seq = rec.seq.load(std::memory_order_relaxed);
  if (seq != 2 * cursor + 2) {
    if (seq == 2 * cursor + 1) {
      Fail(local_rank, st, &st.torn,
           absl::StrCat("record ", cursor, " is torn (its writer died while writing it)"));
    } else {
      Fail(local_rank, st, &st.invalid,
           absl::StrCat("record ", cursor, " has sequence ", seq, ", expected ", 2 * cursor + 2,
                        " (overwritten or corrupt)"));
    }
    return std::nullopt;
  }
  if (!st.schema_ok) {
    Fail(local_rank, st, &st.invalid,
         absl::StrCat("record ", cursor, " arrived in a slot without a valid schema"));
    return std::nullopt;
  }
  if (rec.schema_hash != st.schema_hash) {
    Fail(local_rank, st, &st.invalid,
         absl::StrCat("record ", cursor, " was written under another schema (by owner generation ",
                      rec.generation, ", before the slot's current owner)"));
    return std::nullopt;
  }
  const uint32_t count = rec.stage_count;
  if (count != st.stages.size()) {
    Fail(local_rank, st, &st.invalid,
         absl::StrCat("record ", cursor, " has ", count, " stages, the schema has ",
                      st.stages.size()));
    return std::nullopt;
  }
  return count;
}

void SegmentReader::CheckClocks(uint32_t local_rank, SlotState& st, int64_t step, int64_t end_ns) {
  // Counted, and the record still goes on (its durations are valid).
  if (st.last_end_ns >= 0 && scratch_.boundaries_ns[0] < st.last_end_ns) {
    Fail(local_rank, st, &st.clock_backwards,
         absl::StrCat("step ", step, " starts ", st.last_end_ns - scratch_.boundaries_ns[0],
                      " ns before the previous step ended: the stub's clock went backwards"));
  }
  if (end_ns > drain_now_ns_ + kClockAheadToleranceNs) {
    Fail(local_rank, st, &st.clock_ahead,
         absl::StrCat("step ", step, " ends ", end_ns - drain_now_ns_,
                      " ns after the node's monotonic clock now: the stub does not use "
                      "CLOCK_MONOTONIC, or its clock jumped"));
  }
  st.last_end_ns = std::max(st.last_end_ns, end_ns);
}

bool SegmentReader::AdvanceStep(uint32_t local_rank, SlotState& st, int64_t step) {
  if (st.have_step && step <= st.last_step) {
    if (!st.have_previous || step <= st.previous_step) {
      Fail(local_rank, st, &st.invalid,
           absl::StrCat("step ", step, " is not after step ", st.last_step,
                        " (duplicated or out of order)"));
      return false;
    }
    // The stream goes on from the step before the last one: that last step number was the
    // odd one out (corrupt). Resynchronize instead of refusing the rest of the rank's steps.
    Fail(
        local_rank, st, &st.resynced,
        absl::StrCat("step ", step, " follows step ", st.previous_step, ", not step ", st.last_step,
                     ": step ", st.last_step, " was out of sequence; resynchronized"));
    st.gap_steps -= std::min<uint64_t>(st.gap_steps,
                                       static_cast<uint64_t>(st.last_step - st.previous_step - 1));
    st.last_step = st.previous_step;
  }
  if (st.have_step) st.gap_steps += static_cast<uint64_t>(step - st.last_step - 1);
  st.have_previous = st.have_step;
  st.previous_step = st.last_step;
  st.have_step = true;
  st.last_step = step;
  return true;
}

bool SegmentReader::Decode(uint32_t local_rank, SlotState& st, uint64_t cursor) {
  const v1::StepRecord& rec = view_.record(local_rank, cursor);
  // Each field of the record is read once: the writer (or anyone with write access) may change
  // it under us, so the count checked is the count used.
  const std::optional<uint32_t> count = CheckHeader(local_rank, st, rec, cursor);
  if (!count) return false;
  const int64_t step = rec.step;
  scratch_.boundaries_ns.assign(rec.boundaries_ns, rec.boundaries_ns + *count + 1);
  const int64_t end_ns = rec.end_ns;
  uint32_t bad_stage = 0;
  if (const RecordProblem p =
          CheckStepRecord(step, scratch_.boundaries_ns.data(), *count, end_ns, &bad_stage);
      p != RecordProblem::kNone) {
    const bool stage_problem =
        p == RecordProblem::kStageBackwards || p == RecordProblem::kStageTooLong;
    if (p == RecordProblem::kStageBackwards || p == RecordProblem::kEndBeforeLastStage) {
      ++st.clock_backwards;
    }
    Fail(local_rank, st, &st.invalid,
         absl::StrCat(
             "record ", cursor, " (step ", step, "): ", RecordProblemText(p),
             stage_problem ? absl::StrCat(" (stage \"", st.stages[bad_stage].first, "\")") : ""));
    return false;
  }
  const uint32_t generation = rec.generation;
  if (generation != st.step_generation) {
    st.step_generation = generation;
    st.have_step = false;  // a new owner may restart its step numbering (elastic restart)
    st.have_previous = false;
    st.last_end_ns = -1;
  }
  CheckClocks(local_rank, st, step, end_ns);
  if (!AdvanceStep(local_rank, st, step)) return false;
  const v1::SlotHeader& slot = view_.slot(local_rank);
  scratch_.local_rank = local_rank;
  scratch_.rank = slot.rank;
  scratch_.generation = generation;
  scratch_.step = step;
  scratch_.end_ns = end_ns;
  scratch_.flags = rec.flags;
  return true;
}

size_t SegmentReader::Drain(const std::function<void(const DrainedStep&)>& sink,
                            size_t max_per_slot) {
  size_t delivered = 0;
  const int64_t now = MonotonicNowNs();
  drain_now_ns_ = now;
  const uint32_t me = static_cast<uint32_t>(getpid());
  for (uint32_t i = 0; i < view_.slot_count(); ++i) {
    v1::SlotHeader& slot = view_.slot(i);
    SlotState& st = slots_[i];
    slot.reader_pid.store(me, std::memory_order_relaxed);
    slot.reader_heartbeat_ns.store(now, std::memory_order_relaxed);
    const uint64_t committed = slot.read_cursor.load(std::memory_order_relaxed);
    uint64_t r = committed;
    if (!options_.commit_on_drain && st.reading_ahead &&
        st.next - committed <= view_.ring_capacity()) {
      r = st.next;
    }
    const uint64_t w = slot.write_cursor.load(std::memory_order_acquire);
    RefreshSchema(i, st);
    if (w == r) continue;
    if (w - r > view_.ring_capacity()) {
      Fail(i, st, &st.invalid,
           absl::StrCat("write cursor ", w, " and read cursor ", r,
                        " are more than a ring apart: corrupt cursors, skipping to ", w));
      slot.read_cursor.store(w, std::memory_order_release);
      st.reading_ahead = false;
      continue;
    }
    size_t n = 0;
    for (; r != w && n < max_per_slot; ++r, ++n) {
      if (options_.hold) {
        const v1::StepRecord& rec = view_.record(i, r);
        if (rec.seq.load(std::memory_order_acquire) == 2 * r + 2 && options_.hold(i, rec.end_ns)) {
          break;
        }
      }
      if (Decode(i, st, r)) {
        ++st.records_read;
        ++delivered;
        scratch_.cursor_after = r + 1;
        sink(scratch_);
      }
    }
    if (options_.commit_on_drain) {
      // Hands the consumed records back to the writer.
      slot.read_cursor.store(r, std::memory_order_release);
    } else {
      st.reading_ahead = true;
      st.next = r;
    }
  }
  return delivered;
}

void SegmentReader::Commit(uint32_t local_rank, uint64_t cursor) {
  if (local_rank >= slots_.size()) return;
  v1::SlotHeader& slot = view_.slot(local_rank);
  const SlotState& st = slots_[local_rank];
  const uint64_t committed = slot.read_cursor.load(std::memory_order_relaxed);
  const uint64_t limit = st.reading_ahead ? st.next : committed;
  // Unsigned distances: cursors only grow, and wrap-around is 2^64 records away.
  if (cursor - committed > limit - committed || cursor == committed) return;
  slot.read_cursor.store(cursor, std::memory_order_release);
}

uint64_t SegmentReader::ReadAhead(uint32_t local_rank) const {
  const uint64_t committed = view_.slot(local_rank).read_cursor.load(std::memory_order_relaxed);
  const SlotState& st = slots_[local_rank];
  return st.reading_ahead && st.next - committed <= view_.ring_capacity() ? st.next : committed;
}

void SegmentReader::Rewind() {
  for (SlotState& st : slots_) {
    st.reading_ahead = false;
    st.have_step = false;
    st.have_previous = false;
    st.last_end_ns = -1;  // re-read records are not a clock going backwards
  }
}

void SegmentReader::RefreshSchemas() {
  for (uint32_t i = 0; i < view_.slot_count(); ++i) RefreshSchema(i, slots_[i]);
}

SlotReport SegmentReader::Report(uint32_t local_rank) const {
  const v1::SlotHeader& slot = view_.slot(local_rank);
  const SlotState& st = slots_[local_rank];
  SlotReport r;
  r.local_rank = local_rank;
  r.state = slot.state.load(std::memory_order_acquire);
  r.rank = slot.rank;
  r.world_size = slot.world_size;
  r.owner_pid = slot.owner_pid.load(std::memory_order_relaxed);
  const int64_t now = MonotonicNowNs();
  r.owner = JudgeOwner(slot, now, options_.stale_after_ns);
  r.heartbeat_age_ns = HeartbeatAgeNs(now, slot.heartbeat_ns.load(std::memory_order_relaxed));
  r.generation = slot.generation.load(std::memory_order_relaxed);
  r.stages = st.stages;
  r.layout = st.layout;
  r.records_read = st.records_read;
  r.dropped_by_writer = slot.dropped_full.load(std::memory_order_relaxed);
  r.torn = st.torn;
  r.invalid = st.invalid;
  r.gap_steps = st.gap_steps;
  r.resynced = st.resynced;
  r.clock_backwards = st.clock_backwards;
  r.clock_ahead = st.clock_ahead;
  r.pending = slot.write_cursor.load(std::memory_order_acquire) -
              slot.read_cursor.load(std::memory_order_relaxed);
  r.last_error = st.last_error;
  return r;
}

std::vector<SlotReport> SegmentReader::Reports() const {
  std::vector<SlotReport> out;
  out.reserve(slots_.size());
  for (uint32_t i = 0; i < slots_.size(); ++i) out.push_back(Report(i));
  return out;
}

}  // namespace stagefrontier::shm
