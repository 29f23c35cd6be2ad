#include "shm/slot_ownership.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "shm/monotonic_clock.h"
#include "shm/open_stage.h"

namespace stagefrontier::shm {

const char* OwnerHealthName(OwnerHealth health) {
  switch (health) {
    case OwnerHealth::kNone:
      return "none";
    case OwnerHealth::kAlive:
      return "alive";
    case OwnerHealth::kDead:
      return "dead";
    case OwnerHealth::kSilent:
      return "silent";
  }
  return "unknown";
}

uint64_t SchemaHash(const std::vector<std::pair<std::string, uint8_t>>& stages) {
  uint64_t h = 14695981039346656037ULL;
  auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 1099511628211ULL;
  };
  for (const auto& [name, kind] : stages) {
    for (char c : name) mix(static_cast<unsigned char>(c));
    mix(':');
    mix(static_cast<unsigned char>('0' + kind));
    mix(',');
  }
  return h;
}

bool ValidSlotLayout(const SlotLayout& layout) {
  return layout.pipeline_stages >= 1 && layout.pipeline_stage < layout.pipeline_stages &&
         layout.tensor_size >= 1 && layout.tensor_rank < layout.tensor_size;
}

uint64_t CurrentPidNamespace() {
  struct stat st {};
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

int64_t HeartbeatAgeNs(int64_t now_ns, int64_t heartbeat_ns) {
  if (heartbeat_ns >= now_ns) return 0;
  const uint64_t age = static_cast<uint64_t>(now_ns) - static_cast<uint64_t>(heartbeat_ns);
  return age > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(age);
}

OwnerHealth JudgeOwner(const v1::SlotHeader& slot, int64_t now_ns, int64_t stale_after_ns) {
  const uint32_t pid = slot.owner_pid.load(std::memory_order_acquire);
  if (pid == 0) return OwnerHealth::kNone;
  const uint64_t ns = slot.owner_pid_ns.load(std::memory_order_relaxed);
  if (ns != 0 && ns == CurrentPidNamespace()) {
    return ProcessExists(pid) ? OwnerHealth::kAlive : OwnerHealth::kDead;
  }
  const int64_t age = HeartbeatAgeNs(now_ns, slot.heartbeat_ns.load(std::memory_order_relaxed));
  return age > stale_after_ns ? OwnerHealth::kSilent : OwnerHealth::kAlive;
}

namespace {

// The identity's own consistency, checked before the slot is touched.
absl::Status CheckIdentity(const SlotIdentity& identity) {
  if (identity.stages.empty() || identity.stages.size() > v1::kMaxStages) {
    return absl::InvalidArgumentError(absl::StrCat("a schema has 1 to ", v1::kMaxStages,
                                                   " stages, not ", identity.stages.size()));
  }
  for (const auto& [name, kind] : identity.stages) {
    if (name.empty() || name.size() >= v1::kStageNameBytes || kind > v1::kMaxStageKind) {
      return absl::InvalidArgumentError(absl::StrCat("stage \"", name, "\": names have 1 to ",
                                                     v1::kStageNameBytes - 1, " characters"));
    }
  }
  if (identity.layout.declared() && !ValidSlotLayout(identity.layout)) {
    const SlotLayout& l = identity.layout;
    return absl::InvalidArgumentError(
        absl::StrCat("rank layout: pipeline stage ", l.pipeline_stage, " of ", l.pipeline_stages,
                     ", tensor rank ", l.tensor_rank, " of ", l.tensor_size, " is inconsistent"));
  }
  if (identity.layout_source > v1::kLayoutSourceMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank layout: unknown layout source ", identity.layout_source));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ClaimResult> ClaimSlot(const SegmentView& view, uint32_t local_rank,
                                      const SlotIdentity& identity, int64_t stale_after_ns) {
  if (local_rank >= view.slot_count()) {
    return absl::OutOfRangeError(
        absl::StrCat("local rank ", local_rank, " but segment has ", view.slot_count(), " slots"));
  }
  if (absl::Status st = CheckIdentity(identity); !st.ok()) return st;
  v1::SlotHeader& slot = view.slot(local_rank);
  const uint32_t me = static_cast<uint32_t>(getpid());
  ClaimResult result;
  bool won = false;
  for (int attempt = 0; attempt < 4 && !won; ++attempt) {
    uint32_t owner = slot.owner_pid.load(std::memory_order_acquire);
    if (owner == me) {
      return absl::UnavailableError(
          absl::StrCat("local rank ", local_rank, " already has a client in this process"));
    }
    if (owner != 0) {
      const OwnerHealth health = JudgeOwner(slot, MonotonicNowNs(), stale_after_ns);
      if (health == OwnerHealth::kAlive) {
        const double age_s =
            HeartbeatAgeNs(MonotonicNowNs(), slot.heartbeat_ns.load(std::memory_order_relaxed)) /
            1e9;
        return absl::UnavailableError(absl::StrCat("slot for local rank ", local_rank,
                                                   " is owned by live pid ", owner,
                                                   " (last heartbeat ", age_s, " s ago)"));
      }
    }
    if (slot.owner_pid.compare_exchange_strong(owner, me, std::memory_order_acq_rel)) {
      won = true;
      if (owner != 0) {
        result.reclaimed_stale = true;
        result.previous_owner_pid = owner;
      }
    }
  }
  if (!won) {
    return absl::UnavailableError(
        absl::StrCat("slot for local rank ", local_rank, " is contended by other processes"));
  }
  slot.state.store(v1::kSlotClaiming, std::memory_order_release);
  slot.owner_pid_ns.store(CurrentPidNamespace(), std::memory_order_relaxed);
  result.generation = slot.generation.fetch_add(1, std::memory_order_relaxed) + 1;
  slot.heartbeat_ns.store(MonotonicNowNs(), std::memory_order_relaxed);
  slot.rank = identity.rank;
  slot.world_size = identity.world_size;
  slot.local_world_size = identity.local_world_size;
  slot.stage_count = static_cast<uint32_t>(identity.stages.size());
  slot.schema_hash = SchemaHash(identity.stages);
  // Overwritten at every claim: zeros (none declared) unless this owner declared one.
  const SlotLayout layout = identity.layout.declared() ? identity.layout : SlotLayout{};
  slot.pipeline_stage = layout.pipeline_stage;
  slot.pipeline_stages = layout.pipeline_stages;
  slot.tensor_rank = layout.tensor_rank;
  slot.tensor_size = layout.tensor_size;
  slot.layout_source = identity.layout_source;
  for (size_t k = 0; k < v1::kMaxStages; ++k) {
    v1::StageDesc& d = slot.stages[k];
    std::memset(&d, 0, sizeof(d));
    if (k < identity.stages.size()) {
      std::memcpy(d.name, identity.stages[k].first.data(), identity.stages[k].first.size());
      d.kind = identity.stages[k].second;
    }
  }
  // The previous owner's capture answer and handler are not this owner's.
  slot.capture_state.store(v1::kCaptureNone, std::memory_order_relaxed);
  slot.capture_handler.store(0, std::memory_order_relaxed);
  slot.dump_signal.store(0, std::memory_order_relaxed);
  slot.dump_answered_id.store(0, std::memory_order_relaxed);
  slot.dump_request_id.store(0, std::memory_order_relaxed);
  slot.exit_reason.store(v1::kExitNotSaid, std::memory_order_relaxed);
  // Nor its open stage (it may have died mid-write, leaving the sequence odd).
  ResetOpenStage(slot);
  // A record the previous owner began but never published carries an odd sequence number.
  // Publish it as it is: the reader sees the mismatch, counts it torn and moves on.
  const uint64_t w = slot.write_cursor.load(std::memory_order_relaxed);
  const uint64_t r = slot.read_cursor.load(std::memory_order_acquire);
  if (w - r < view.ring_capacity() &&
      view.record(local_rank, w).seq.load(std::memory_order_relaxed) == 2 * w + 1) {
    slot.torn_recovered.fetch_add(1, std::memory_order_relaxed);
    slot.write_cursor.store(w + 1, std::memory_order_release);
    result.published_torn = true;
  }
  slot.state.store(v1::kSlotActive, std::memory_order_release);
  return result;
}

bool ReleaseSlot(v1::SlotHeader& slot) {
  // A slot another process took over (this one judged silent across PID namespaces) is
  // theirs: releasing it would free it under them.
  uint32_t me = static_cast<uint32_t>(getpid());
  if (slot.owner_pid.load(std::memory_order_acquire) != me) return false;
  slot.state.store(v1::kSlotReleased, std::memory_order_release);
  return slot.owner_pid.compare_exchange_strong(me, 0, std::memory_order_acq_rel);
}

namespace {

// A process that exited but was not reaped yet answers kill(pid, 0): its state in
// /proc/<pid>/stat (the field after the parenthesised name) is 'Z'.
bool IsZombie(uint32_t pid) {
  char path[32];
  std::snprintf(path, sizeof(path), "/proc/%u/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* end = std::strrchr(buf, ')');
  return end != nullptr && end[1] == ' ' && end[2] == 'Z';
}

}  // namespace

bool ProcessExists(uint32_t pid) {
  // The pid is the trainer's to write: above Linux's largest pid_max (2^22) it is no process,
  // and as a negative pid_t kill() would probe a process group (as root, -1: every process).
  constexpr uint32_t kMaxPid = 1U << 22;
  if (pid == 0 || pid > kMaxPid) return false;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  // An exited process its parent has not reaped yet writes nothing more: it is dead.
  return !IsZombie(pid);
}

}  // namespace stagefrontier::shm
