// The per-node shared-memory segment, layout version 1. FROZEN: never change a field, an
// offset or a size here; reserved bytes may only gain fields whose zero means "absent"
// (the self-test, capture, open-stage, hang-dump and rank-layout extensions below, documented
// in docs/segment-format.md). Extend in segment_layout_v2.h and teach the reader both; a reader
// refuses versions newer than it knows (see segment_view.h). Byte-level description:
// docs/segment-format.md.
//
//   [SegmentHeader, 4096 bytes][slot 0][slot 1]...[slot N-1]
//   slot = [SlotHeader, 1856 bytes][StepRecord x ring_capacity, 320 bytes each]
//
// All integers are little-endian (x86-64 and aarch64 native). Times are CLOCK_MONOTONIC
// nanoseconds of the writing process, except SegmentHeader::creation_time_unix_ns.
//
// Usage (inside this project only; users go through client/ and segment_reader.h):
//   const v1::SegmentHeader* h = reinterpret_cast<const v1::SegmentHeader*>(base);
//   if (h->magic == v1::kMagic && h->layout_version == 1) { ... }
#ifndef STAGEFRONTIER_SHM_SEGMENT_LAYOUT_V1_H_
#define STAGEFRONTIER_SHM_SEGMENT_LAYOUT_V1_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace stagefrontier::shm::v1 {

inline constexpr uint32_t kLayoutVersion = 1;
// The bytes "SFSEGMNT" read as a little-endian uint64.
inline constexpr uint64_t kMagic = 0x544E4D4745534653ULL;
// init_complete holds this value once the creator has written every field ("INIT").
inline constexpr uint32_t kInitComplete = 0x54494E49U;

inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kHeaderBytes = 4096;
inline constexpr size_t kMaxStages = 32;
inline constexpr size_t kStageNameBytes = 40;  // NUL-terminated, so 39 characters at most
inline constexpr size_t kJobIdBytes = 64;      // NUL-terminated, so 63 characters at most
inline constexpr uint32_t kMaxSlots = 1024;
inline constexpr uint32_t kMinRingCapacity = 2;
inline constexpr uint32_t kMaxRingCapacity = 1U << 20;

struct SegmentHeader {
  uint64_t magic;                       // 0   kMagic
  uint32_t layout_version;              // 8   1
  uint32_t header_bytes;                // 12  kHeaderBytes
  uint64_t total_bytes;                 // 16  file size
  int64_t creation_time_unix_ns;        // 24  CLOCK_REALTIME at creation
  uint32_t creator_pid;                 // 32
  uint32_t slot_count;                  // 36  one slot per local rank
  uint64_t slot_bytes;                  // 40  sizeof(SlotHeader) + ring_capacity * record_bytes
  uint32_t ring_capacity;               // 48  records per ring, a power of two
  uint32_t record_bytes;                // 52  sizeof(StepRecord)
  uint32_t max_stages;                  // 56  kMaxStages
  std::atomic<uint32_t> init_complete;  // 60  kInitComplete, stored last with release order
  char job_id[kJobIdBytes];             // 64
  uint64_t slots_offset;                // 128 kHeaderBytes
  uint8_t reserved[kHeaderBytes - 136];
};
static_assert(sizeof(SegmentHeader) == kHeaderBytes);
static_assert(offsetof(SegmentHeader, init_complete) == 60);
static_assert(offsetof(SegmentHeader, job_id) == 64);
static_assert(offsetof(SegmentHeader, slots_offset) == 128);

// Slot ownership states.
enum SlotState : uint32_t {
  kSlotFree = 0,      // never claimed
  kSlotClaiming = 1,  // an owner is writing identity and schema
  kSlotActive = 2,    // identity and schema are valid; the owner writes records
  kSlotReleased = 3,  // the owner exited cleanly; unread records stay readable
};

// StageDesc::kind's largest value (4 p2p and 5 tensor, added in place: readers before them
// refuse the slot's schema as invalid, naming the stage).
inline constexpr uint8_t kMaxStageKind = 5;

struct StageDesc {
  char name[kStageNameBytes];  // 0
  uint8_t kind;                // 40  0 io, 1 compute, 2 sync, 3 mixed, 4 p2p, 5 tensor
  uint8_t reserved[7];         // 41
};
static_assert(sizeof(StageDesc) == 48);

// Control requests, coordinator -> sidecar -> stub. One writer (the sidecar) uses a sequence
// lock: `seq` is odd while it writes, even when the fields are consistent.
struct ControlBlock {
  std::atomic<uint64_t> seq;              // 0
  std::atomic<uint32_t> flags;            // 8   bit 0: paused
  std::atomic<uint32_t> sample_every;     // 12  record one step in N (0 and 1: every step)
  std::atomic<int64_t> trace_first_step;  // 16  capture a detailed trace for steps in
  std::atomic<int64_t> trace_last_step;   // 24  [first, last]; last < first: none
  std::atomic<uint64_t> request_id;       // 32  the coordinator's id for the request
  // Self-test extension (bytes v1 reserved as zero; docs/segment-format.md): add
  // selftest_delay_us to stage selftest_stage in steps [first, last]; none when the delay is 0
  // (zeroed bytes) or last < first.
  std::atomic<uint32_t> selftest_stage;      // 40
  std::atomic<uint32_t> selftest_delay_us;   // 44
  std::atomic<int64_t> selftest_first_step;  // 48
  std::atomic<int64_t> selftest_last_step;   // 56
};
static_assert(sizeof(ControlBlock) == kCacheLine);
static_assert(offsetof(ControlBlock, selftest_stage) == 40);
inline constexpr uint32_t kControlPaused = 1U << 0;

// The stub's answer to a self-test request (SlotHeader::selftest_state).
enum SelfTestState : uint32_t {
  kSelfTestNone = 0,        // no answer (a stub that predates self-tests never answers)
  kSelfTestAccepted = 1,    // the delay will be added
  kSelfTestNotAllowed = 2,  // refused: the trainer did not set STAGEFRONTIER_ALLOW_SELFTEST=1
  kSelfTestBadRequest = 3,  // refused: no such stage, or over the stub's caps
};

// The stub's answer to a capture request (SlotHeader::capture_state): what the trainer's
// profiler (stagefrontier.torch, or the callbacks a C/C++ trainer registered) did with it.
enum CaptureState : uint32_t {
  kCaptureNone = 0,     // no answer (no profiler in this trainer, or a stub that predates it)
  kCaptureRunning = 1,  // the profiler runs for the requested steps
  kCaptureDone = 2,     // the trace was written (capture_bytes: its size, 0 if unknown)
  kCaptureFailed = 3,   // capture_failure says why; training went on
};
// Why a capture failed (SlotHeader::capture_failure).
enum CaptureFailure : uint32_t {
  kCaptureFailureNone = 0,
  kCaptureProfilerBusy = 1,    // a profiler was already running (the script profiles itself)
  kCaptureStartFailed = 2,     // the profiler refused to start
  kCaptureWriteFailed = 3,     // the trace could not be written (full disk, permissions)
  kCaptureCallbackFailed = 4,  // a registered begin/end callback returned an error or threw
  kCaptureMissed = 5,          // the requested steps were past when the request arrived
};
inline constexpr uint32_t kCaptureFailureMax = kCaptureMissed;

// SlotHeader::layout_source: how the owner came by its rank layout, or why it declared none
// (stagefrontier.torch infers it; `sfctl health` tells the user what could not be inferred).
enum LayoutSource : uint32_t {
  kLayoutSourceUnset = 0,             // not said (a stub that predates the field)
  kLayoutSourceDeclared = 1,          // the program declared it (layout=, ClientOptions, C)
  kLayoutSourceNone = 2,              // none declared, no reason given
  kLayoutSourceEnvironment = 3,       // STAGEFRONTIER_LAYOUT
  kLayoutSourceInferred = 4,          // stagefrontier.torch, from the rank's DDP process group
  kLayoutSourceDataParallelOnly = 5,  // none: DDP spans the whole world (one group is right)
  kLayoutSourceInferenceOff = 6,      // none: STAGEFRONTIER_TORCH_INFER_LAYOUT=0
  kLayoutSourceNotInferred = 7,       // none: the DDP group is not a regular layout
  kLayoutSourceNoDdp = 8,             // none: the first step came before any DDP
  kLayoutSourceRefused = 9,           // none: the stub refused the layout it was given
};
inline constexpr uint32_t kLayoutSourceMax = kLayoutSourceRefused;

// The name the sidecar reports (SlotHealth.layout_source); "" for unset, "invalid" past the
// last known value (the bytes come from the trainer).
inline constexpr const char* LayoutSourceName(uint32_t source) {
  constexpr const char* kNames[] = {"",
                                    "declared",
                                    "none",
                                    "environment",
                                    "inferred",
                                    "data_parallel_only",
                                    "inference_off",
                                    "not_inferred",
                                    "no_ddp",
                                    "refused"};
  return source <= kLayoutSourceMax ? kNames[source] : "invalid";
}

// LayoutSourceName's inverse: the value whose name is `name`, or kLayoutSourceMax + 1 (a
// name no sidecar sends: the coordinator shows it as "invalid").
inline constexpr uint32_t LayoutSourceFromName(std::string_view name) {
  for (uint32_t s = 0; s <= kLayoutSourceMax; ++s) {
    if (name == LayoutSourceName(s)) return s;
  }
  return kLayoutSourceMax + 1;
}

// Whether a layout comes with this source (declared, environment, inferred) or not.
inline constexpr bool LayoutSourceHasLayout(uint32_t source) {
  return source == kLayoutSourceDeclared || source == kLayoutSourceEnvironment ||
         source == kLayoutSourceInferred;
}

// SlotHeader::exit_reason values: why the owner released its slot, when it says (docs/
// segment-format.md "Exit reason"). 0 also for a clean end and for a stub that predates it.
inline constexpr uint32_t kExitNotSaid = 0;
inline constexpr uint32_t kExitException = 1;  // the trainer ends on an uncaught exception
// ... that a collective raised (the process group's error: a peer gone), so the rank is that
// collective's victim wherever its open stage is (DDP's forward broadcasts too).
inline constexpr uint32_t kExitCollectiveException = 2;
inline constexpr const char* ExitReasonName(uint32_t reason) {
  return reason == kExitNotSaid               ? ""
         : reason == kExitException           ? "exception"
         : reason == kExitCollectiveException ? "collective_exception"
                                              : "invalid";
}

// SlotHeader::open_stage values besides 1 + k (stage k is open).
inline constexpr uint32_t kOpenStageNone = 0;  // nothing published (an older stub, or none yet)
inline constexpr uint32_t kOpenStageBetweenSteps = 0xFFFFFFFFU;  // the step ended, no new one

struct alignas(kCacheLine) SlotHeader {
  // Ownership (line 0): written by the owning stub.
  std::atomic<uint32_t> state;         // 0   SlotState
  std::atomic<uint32_t> owner_pid;     // 4   0 = none
  std::atomic<uint64_t> owner_pid_ns;  // 8   inode of the owner's /proc/self/ns/pid
  std::atomic<uint64_t> generation;    // 16  incremented by every claim
  std::atomic<int64_t> heartbeat_ns;   // 24  owner's clock at claim and every end of step
  int32_t rank;                        // 32  global rank
  int32_t world_size;                  // 36
  int32_t local_world_size;            // 40
  uint32_t stage_count;                // 44  1..kMaxStages
  uint64_t schema_hash;                // 48  SchemaHash() of the stages below
  // Rank layout extension (bytes v1 reserved as zero; docs/segment-format.md "Rank layout"):
  // where the rank sits in a pipeline x tensor x data-parallel job, written with the identity
  // at every claim. pipeline_stages 0: none declared (what a stub that predates it leaves).
  uint16_t pipeline_stage;             // 56  0 .. pipeline_stages - 1
  uint16_t pipeline_stages;            // 58  0: no layout declared
  uint16_t tensor_rank;                // 60  0 .. tensor_size - 1
  uint16_t tensor_size;                // 62  1 without tensor parallelism
  StageDesc stages[kMaxStages];        // 64
  // Writer line: written by the stub only.
  alignas(kCacheLine) std::atomic<uint64_t> write_cursor;  // 1600 records published
  std::atomic<uint64_t> dropped_full;                      // 1608 records dropped, ring full
  std::atomic<uint64_t> torn_recovered;                    // 1616 torn records published
  // Open stage extension (bytes v1 reserved as zero; docs/segment-format.md "Open stage"):
  // the stage the stub last opened, under a sequence lock (open_seq odd while written).
  // open_stage: kOpenStageNone, 1 + k (stage k), or kOpenStageBetweenSteps. Reset by claims.
  std::atomic<uint64_t> open_seq;      // 1624
  std::atomic<int64_t> open_step;      // 1632
  std::atomic<int64_t> open_since_ns;  // 1640 when it opened (owner's clock)
  std::atomic<uint32_t> open_stage;    // 1648
  // Layout source extension (bytes v1 reserved as zero; docs/segment-format.md "Layout
  // source"): how the owner came by its layout, or why it has none (LayoutSource). Written
  // with the identity at every claim.
  uint32_t layout_source;  // 1652
  // Exit reason extension (bytes v1 reserved as zero; docs/segment-format.md "Exit reason"):
  // kExitException once the owner's trainer is ending on an uncaught exception, stored before
  // the release; the open stage above then still names where it was. Cleared by every claim.
  std::atomic<uint32_t> exit_reason;  // 1656
  uint8_t reserved1[4];               // 1660
  // Reader line: written by the sidecar only.
  alignas(kCacheLine) std::atomic<uint64_t> read_cursor;  // 1664 records consumed
  std::atomic<uint32_t> reader_pid;                       // 1672
  uint32_t reserved2;                                     // 1676
  std::atomic<int64_t> reader_heartbeat_ns;               // 1680
  // Hang dump extension (bytes v1 reserved as zero; docs/segment-format.md "Hang dumps"): the
  // capture id of the newest stack dump the sidecar asked, stored before it signals the owner.
  std::atomic<uint64_t> dump_request_id;                  // 1688
  uint8_t reserved3[32];                                  // 1696
  // Control requests: written by the sidecar.
  ControlBlock control;  // 1728
  // Control acknowledgement: written by the stub.
  alignas(kCacheLine) std::atomic<uint64_t> control_applied_seq;  // 1792
  // Self-test answer (bytes v1 reserved as zero): the first step of the request answered,
  // then the answer; selftest_steps_done counts the steps the delay was added to.
  std::atomic<int64_t> selftest_answered_first_step;  // 1800
  std::atomic<uint32_t> selftest_state;               // 1808 SelfTestState
  std::atomic<uint32_t> selftest_steps_done;          // 1812
  // Capture answer (bytes v1 reserved as zero): the trace_first_step of the request answered,
  // then the answer; the state is stored last.
  std::atomic<int64_t> capture_answered_first_step;  // 1816
  std::atomic<uint32_t> capture_state;               // 1824 CaptureState
  std::atomic<uint32_t> capture_failure;             // 1828 CaptureFailure
  std::atomic<uint64_t> capture_bytes;               // 1832
  // 1 while the owner has a capture handler (stagefrontier.torch, or C/C++ callbacks): the
  // coordinator asks captures only of ranks that can take them. Cleared by every claim.
  std::atomic<uint32_t> capture_handler;  // 1840
  // Hang dump extension: the signal the owner takes as "dump your stacks" (SIGUSR1 or SIGUSR2;
  // 0: none, never signalled), and the dump_request_id it last wrote a dump for. Cleared by
  // every claim.
  std::atomic<uint32_t> dump_signal;       // 1844
  std::atomic<uint64_t> dump_answered_id;  // 1848
};
static_assert(sizeof(SlotHeader) == 1856);
static_assert(offsetof(SlotHeader, pipeline_stage) == 56);
static_assert(offsetof(SlotHeader, pipeline_stages) == 58);
static_assert(offsetof(SlotHeader, tensor_rank) == 60);
static_assert(offsetof(SlotHeader, tensor_size) == 62);
static_assert(offsetof(SlotHeader, layout_source) == 1652);
static_assert(offsetof(SlotHeader, exit_reason) == 1656);
static_assert(offsetof(SlotHeader, stages) == 64);
static_assert(offsetof(SlotHeader, write_cursor) == 1600);
static_assert(offsetof(SlotHeader, open_seq) == 1624);
static_assert(offsetof(SlotHeader, open_step) == 1632);
static_assert(offsetof(SlotHeader, open_since_ns) == 1640);
static_assert(offsetof(SlotHeader, open_stage) == 1648);
static_assert(offsetof(SlotHeader, read_cursor) == 1664);
static_assert(offsetof(SlotHeader, control) == 1728);
static_assert(offsetof(SlotHeader, control_applied_seq) == 1792);
static_assert(offsetof(SlotHeader, selftest_state) == 1808);
static_assert(offsetof(SlotHeader, capture_answered_first_step) == 1816);
static_assert(offsetof(SlotHeader, capture_bytes) == 1832);
static_assert(offsetof(SlotHeader, capture_handler) == 1840);
static_assert(offsetof(SlotHeader, dump_request_id) == 1688);
static_assert(offsetof(SlotHeader, dump_signal) == 1844);
static_assert(offsetof(SlotHeader, dump_answered_id) == 1848);

// Record flags.
inline constexpr uint32_t kRecordStageReentered = 1U << 0;  // a stage was entered twice or more
inline constexpr uint32_t kRecordStageMissing = 1U << 1;    // a stage was never entered
inline constexpr uint32_t kRecordStagesOverlap = 1U << 2;   // stage scopes nested or overlapped
// A step inside a trace request, or the one right after it (the profiler's stop and export).
inline constexpr uint32_t kRecordTraceCaptured = 1U << 3;
inline constexpr uint32_t kRecordSelfTestDelay = 1U << 4;   // a self-test delay was added

// One step of one rank. Record i of a ring lives at index i % ring_capacity; `seq` is
// 2*i+1 while the writer fills it and 2*i+2 once it is complete. `schema_hash` and
// `generation` say which owner wrote it: unread records outlive their owner, and the next
// owner may declare another schema.
struct alignas(kCacheLine) StepRecord {
  std::atomic<uint64_t> seq;              // 0
  int64_t step;                           // 8
  int64_t end_ns;                         // 16  when the stub ended the step
  uint32_t flags;                         // 24
  uint32_t stage_count;                   // 28
  int64_t boundaries_ns[kMaxStages + 1];  // 32  [0] step start, [k] end of stage k
  uint64_t schema_hash;                   // 296 the writer's SlotHeader::schema_hash
  uint32_t generation;                    // 304 low 32 bits of the writer's generation
  uint8_t reserved[12];                   // 308
};
static_assert(sizeof(StepRecord) == 320);
static_assert(offsetof(StepRecord, schema_hash) == 296);

inline constexpr uint64_t SlotBytes(uint32_t ring_capacity) {
  return sizeof(SlotHeader) + uint64_t{ring_capacity} * sizeof(StepRecord);
}
inline constexpr uint64_t SegmentBytes(uint32_t slot_count, uint32_t ring_capacity) {
  return kHeaderBytes + uint64_t{slot_count} * SlotBytes(ring_capacity);
}

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

}  // namespace stagefrontier::shm::v1

#endif  // STAGEFRONTIER_SHM_SEGMENT_LAYOUT_V1_H_
