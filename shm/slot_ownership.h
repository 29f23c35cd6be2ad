// Who owns a slot, and how a new process takes over a slot whose owner is gone.
//
// A slot is owned by one stub process (one local rank). A claim succeeds on a free or
// released slot, or on a stale one: an owner proven dead (same PID namespace: kill(pid, 0)
// says ESRCH) or, across PID namespaces (trainer and sidecar in different pods), an owner
// whose heartbeat is older than `stale_after_ns`. If the dead owner left a half-written
// record, the claimer publishes it as torn so that the reader counts and skips it.
//
//   SlotIdentity id{
//       .rank = 3, .world_size = 16, .local_world_size = 8, .stages = schema, .layout = {}};
//   absl::StatusOr<ClaimResult> claim = ClaimSlot(view, /*local_rank=*/3, id);
//   ...
//   ReleaseSlot(view.slot(3));  // at clean exit
#ifndef STAGEFRONTIER_SHM_SLOT_OWNERSHIP_H_
#define STAGEFRONTIER_SHM_SLOT_OWNERSHIP_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "shm/segment_view.h"

namespace stagefrontier::shm {

inline constexpr int64_t kDefaultStaleAfterNs = 60'000'000'000;  // 60 s without a heartbeat

// Where a rank sits in a pipeline x tensor x data-parallel job (SlotHeader offsets 56..63).
// pipeline_stages 0: none declared.
struct SlotLayout {
  uint16_t pipeline_stage = 0;
  uint16_t pipeline_stages = 0;
  uint16_t tensor_rank = 0;
  uint16_t tensor_size = 0;

  bool declared() const { return pipeline_stages != 0; }
  bool operator==(const SlotLayout&) const = default;
};

// Whether a declared layout is consistent: pipeline_stage < pipeline_stages, tensor_size >= 1,
// tensor_rank < tensor_size. A layout that declares none is not valid (there is nothing to
// check). The bytes come from the trainer: the reader checks them with this.
bool ValidSlotLayout(const SlotLayout& layout);

struct SlotIdentity {
  int32_t rank = 0;
  int32_t world_size = 1;
  int32_t local_world_size = 1;
  // (name, kind) per stage; kind is 0 io, 1 compute, 2 sync, 3 mixed.
  std::vector<std::pair<std::string, uint8_t>> stages;
  // The rank's layout, written at claim; default: none declared.
  SlotLayout layout;
  // How it came by it, or why none (v1::LayoutSource; 0 unset), written at claim.
  uint32_t layout_source = 0;
};

struct ClaimResult {
  uint64_t generation = 0;
  bool reclaimed_stale = false;  // the previous owner had died without releasing
  uint32_t previous_owner_pid = 0;
  bool published_torn = false;  // it died mid-record; that record is now marked torn
};

enum class OwnerHealth {
  kNone,    // free or released
  kAlive,   // owner process exists, or heartbeat fresh
  kDead,    // owner process is gone (same PID namespace)
  kSilent,  // other PID namespace and heartbeat older than stale_after_ns
};

// Returns "none", "alive", "dead" or "silent".
const char* OwnerHealthName(OwnerHealth health);

// FNV-1a (64 bit) over "name:kind," for each stage: the slot's and records' schema_hash.
uint64_t SchemaHash(const std::vector<std::pair<std::string, uint8_t>>& stages);

// Inode of this process's PID namespace (/proc/self/ns/pid), 0 if it cannot be read.
uint64_t CurrentPidNamespace();

// Whether process `pid` exists in this PID namespace: kill(pid, 0) succeeds or says EPERM
// (it exists, owned by another user), and it is not a zombie (exited, not reaped yet: a
// launcher slow to reap a killed rank must not keep it "alive"). 0 is no process.
bool ProcessExists(uint32_t pid);

// now - heartbeat, saturated to [0, INT64_MAX]: heartbeats are read from shared memory and
// may be anything.
int64_t HeartbeatAgeNs(int64_t now_ns, int64_t heartbeat_ns);

// Judges the owner of `slot` from this process's point of view.
OwnerHealth JudgeOwner(const v1::SlotHeader& slot, int64_t now_ns,
                       int64_t stale_after_ns = kDefaultStaleAfterNs);

// Claims slot `local_rank` for this process and writes its identity, layout and schema. Fails
// with OutOfRange (local_rank >= slot count), InvalidArgument (schema too long, a name over 39
// characters, a declared layout that ValidSlotLayout refuses), or Unavailable naming the live
// owner's pid.
[[nodiscard]] absl::StatusOr<ClaimResult> ClaimSlot(const SegmentView& view, uint32_t local_rank,
                                                    const SlotIdentity& identity,
                                                    int64_t stale_after_ns = kDefaultStaleAfterNs);

// Marks the slot released by its owner, this process (clean exit); records already published
// stay readable. False, and nothing done, when another process owns it now.
bool ReleaseSlot(v1::SlotHeader& slot);

}  // namespace stagefrontier::shm

#endif  // STAGEFRONTIER_SHM_SLOT_OWNERSHIP_H_
