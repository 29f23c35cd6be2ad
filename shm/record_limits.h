// What a step record, a job id and a stage name may be, everywhere they travel. The stub
// refuses to publish (and counts) what the sidecar would refuse to read, and the sidecar what
// the coordinator would refuse to accept: one definition, so that no layer accepts a record
// the next one refuses (a refused record that is re-sent forever blocks a node).
//
//   int64_t b[] = {t0, t1, t2};
//   if (RecordProblem p = CheckStepRecord(step, b, 2, end_ns); p != RecordProblem::kNone) {
//     count_invalid(RecordProblemText(p));
//   }
//   if (!ValidJobId(job)) refuse();
//
// Header-only and allocation-free: the stub calls it on its hot path.
#ifndef STAGEFRONTIER_SHM_RECORD_LIMITS_H_
#define STAGEFRONTIER_SHM_RECORD_LIMITS_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace stagefrontier::shm {

// Longest plausible stage, step or collective: anything longer is a corrupt record.
inline constexpr int64_t kMaxStageNs = 86'400'000'000'000;  // one day
// Step numbers are 0..kMaxStepNumber (2^40 - 1: 348 years at 100 steps/s). Bounding the
// number bounds every difference between two steps, so the wire's varint deltas cannot
// overflow.
inline constexpr int64_t kMaxStepNumber = (int64_t{1} << 40) - 1;
// Names: job ids (which become file names) and stage names (which become metric labels).
inline constexpr size_t kMaxJobIdChars = 63;
inline constexpr size_t kMaxStageNameChars = 39;

enum class RecordProblem : uint8_t {
  kNone = 0,
  kStepOutOfRange,     // step number outside [0, kMaxStepNumber]
  kNegativeStart,      // the step starts at a negative time
  kStageBackwards,     // a stage ends before it starts
  kStageTooLong,       // a stage lasts more than kMaxStageNs
  kEndBeforeLastStage  // the step ends before its last stage does
};

// Words for a problem: "step number out of range", ...; "" for kNone.
constexpr const char* RecordProblemText(RecordProblem p) {
  switch (p) {
    case RecordProblem::kNone:
      return "";
    case RecordProblem::kStepOutOfRange:
      return "step number outside [0, 2^40)";
    case RecordProblem::kNegativeStart:
      return "step starts at a negative time";
    case RecordProblem::kStageBackwards:
      return "a stage ends before it starts";
    case RecordProblem::kStageTooLong:
      return "a stage lasts more than a day";
    case RecordProblem::kEndBeforeLastStage:
      return "the step ends before its last stage";
  }
  return "unknown problem";
}

constexpr bool ValidStepNumber(int64_t step) { return step >= 0 && step <= kMaxStepNumber; }

// A stage duration as carried on the wire and in the journal.
constexpr bool ValidStageDuration(int64_t ns) { return ns >= 0 && ns <= kMaxStageNs; }

// Checks one step of one rank: its number, stage_count + 1 boundaries (step start, then the end
// of each stage) and the time the step ended. Returns the first problem found, or kNone.
// *bad_stage receives the offending stage for the two stage problems.
constexpr RecordProblem CheckStepRecord(int64_t step, const int64_t* boundaries,
                                        uint32_t stage_count, int64_t end_ns,
                                        uint32_t* bad_stage = nullptr) {
  if (!ValidStepNumber(step)) return RecordProblem::kStepOutOfRange;
  if (boundaries[0] < 0) return RecordProblem::kNegativeStart;
  for (uint32_t k = 1; k <= stage_count; ++k) {
    const int64_t a = boundaries[k - 1];
    const int64_t b = boundaries[k];
    // b - a is computed only when b >= a >= 0, so it cannot overflow.
    if (b < a || b - a > kMaxStageNs) {
      if (bad_stage != nullptr) *bad_stage = k - 1;
      return b < a ? RecordProblem::kStageBackwards : RecordProblem::kStageTooLong;
    }
  }
  if (end_ns < boundaries[stage_count]) return RecordProblem::kEndBeforeLastStage;
  return RecordProblem::kNone;
}

constexpr bool ValidNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

// A job id: 1..63 characters of [A-Za-z0-9_.-], not starting with '.' (it names files).
constexpr bool ValidJobId(std::string_view job) {
  if (job.empty() || job.size() > kMaxJobIdChars || job[0] == '.') return false;
  for (char c : job) {
    if (!ValidNameChar(c)) return false;
  }
  return true;
}

// A stage name: 1..39 characters of [A-Za-z0-9_.-].
constexpr bool ValidStageName(std::string_view name) {
  if (name.empty() || name.size() > kMaxStageNameChars) return false;
  for (char c : name) {
    if (!ValidNameChar(c)) return false;
  }
  return true;
}

}  // namespace stagefrontier::shm

#endif  // STAGEFRONTIER_SHM_RECORD_LIMITS_H_
