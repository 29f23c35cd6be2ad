#include "daemon/coordinator/resource_limits.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"

namespace stagefrontier {
namespace {

std::string Mb(int64_t bytes) { return absl::StrCat((bytes + (1 << 20) - 1) >> 20, " MB"); }

}  // namespace

int64_t EstimateJobBytes(const JobShape& s) {
  const int64_t w = std::max<int64_t>(s.world_size, 1);
  const int64_t k = std::max<int64_t>(s.stages, 1);
  // The engine's window: per rank and step, durations and probe waits (8 bytes per stage
  // each) and a presence byte; plus the current step's matrices (boundaries, cumulative
  // times, lags) and the per-step accounting.
  const int64_t window = (s.window_steps + 4) * w * (16 * k + 1) + 4 * w * (k + 1) * 8 +
                         s.window_steps * (k * 256 + 512);
  // Open steps in the aligner: per rank that reported one, its durations, its arrival slot
  // and an (empty) probe list; a presence bit per rank and step.
  const int64_t pending = s.pending_steps * (w * (8 * k + 4 + 24) + w / 8 + 256);
  // Raw rank-steps kept for re-accounting a window: boundaries in their own allocation; and the
  // aligner's two spare inputs (StepAligner::Recycle), a step of every rank each. (Its spare
  // open-step buffers are counted in `pending`: a new one is made only when none is spare.)
  const int64_t raw =
      (std::min(s.history_rank_steps, s.history_steps * w) + 2 * w) * ((k + 1) * 8 + 96);
  // Step summaries for GetSteps (StepHistory): the newest, up to a block's 256, as protobuf
  // objects (per stage a few numbers, small strings); the rest in summary blocks, never more
  // than their serialized size (~14-17 bytes per stage measured, docs/results.md).
  const int64_t open_summaries = std::min<int64_t>(s.history_steps, 256) * (k * 96 + 256);
  const int64_t summaries = open_summaries + s.history_steps * (k * 80 + 64);
  // Per rank: aligner state, last step, health counters and strings.
  const int64_t ranks = w * 256;
  return window + pending + raw + summaries + ranks;
}

MemoryBudget::MemoryBudget(int64_t total_bytes)
    : total_(total_bytes > 0 ? total_bytes
                             : static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) *
                                   static_cast<int64_t>(sysconf(_SC_PAGE_SIZE)) / 4 * 3) {}

int64_t MemoryBudget::used() const {
  MutexLock lock(&mu_);
  return used_;
}

namespace {
constexpr absl::string_view kNoRoomPayload = "stagefrontier/no-room";
}  // namespace

absl::Status NoRoom(std::string_view message, int64_t needed_bytes) {
  absl::Status s = absl::ResourceExhaustedError(absl::string_view(message.data(), message.size()));
  s.SetPayload(kNoRoomPayload, absl::Cord(std::to_string(needed_bytes)));
  return s;
}

int64_t NoRoomBytes(const absl::Status& status) {
  if (!IsNoRoom(status)) return 0;
  int64_t bytes = 0;
  return absl::SimpleAtoi(std::string(*status.GetPayload(kNoRoomPayload)), &bytes) ? bytes : 0;
}

bool IsNoRoom(const absl::Status& status) {
  return absl::IsResourceExhausted(status) && status.GetPayload(kNoRoomPayload).has_value();
}

absl::Status MemoryBudget::Take(const std::string& what, int64_t bytes, bool force) {
  MutexLock lock(&mu_);
  if (!force && bytes > total_ - used_) {
    return NoRoom(absl::StrCat(what, " needs about ", Mb(bytes), " of coordinator memory; ",
                               Mb(std::max<int64_t>(0, total_ - used_)), " of ", Mb(total_),
                               " are left (--max-memory-mb)"),
                  bytes);
  }
  used_ += bytes;
  return absl::OkStatus();
}

void MemoryBudget::Give(int64_t bytes) {
  MutexLock lock(&mu_);
  used_ -= bytes;
}

absl::StatusOr<MemoryBudget::Reservation> MemoryBudget::Reserve(const std::string& what,
                                                                int64_t bytes) {
  if (absl::Status s = Take(what, bytes, false); !s.ok()) return s;
  Reservation r;
  r.budget_ = this;
  r.bytes_ = bytes;
  return r;
}

MemoryBudget::Reservation MemoryBudget::ReserveAnyway(int64_t bytes, bool* over) {
  {
    MutexLock lock(&mu_);
    *over = bytes > total_ - used_;
  }
  (void)Take("", bytes, true);
  Reservation r;
  r.budget_ = this;
  r.bytes_ = bytes;
  return r;
}

MemoryBudget::Reservation::Reservation(Reservation&& other) noexcept
    : budget_(other.budget_), bytes_(other.bytes_) {
  other.budget_ = nullptr;
  other.bytes_ = 0;
}

MemoryBudget::Reservation& MemoryBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    if (budget_ != nullptr) budget_->Give(bytes_);
    budget_ = other.budget_;
    bytes_ = other.bytes_;
    other.budget_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

MemoryBudget::Reservation::~Reservation() {
  if (budget_ != nullptr) budget_->Give(bytes_);
}

absl::Status MemoryBudget::Reservation::Resize(int64_t bytes, const std::string& what) {
  if (budget_ == nullptr) return absl::OkStatus();
  if (bytes > bytes_) {
    if (absl::Status s = budget_->Take(what, bytes - bytes_, false); !s.ok()) return s;
  } else {
    budget_->Give(bytes_ - bytes);
  }
  bytes_ = bytes;
  return absl::OkStatus();
}

}  // namespace stagefrontier
