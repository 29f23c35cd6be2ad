/* StageFrontier stub, stable C ABI (version 1).
 *
 * Conventions
 *  - Handles are opaque: sf_client*. Every function accepts a NULL handle and then does
 *    nothing (or returns 0 / NULL), so a trainer may keep calling after a failed create.
 *  - Functions that can fail return an int: SF_OK (0) or a negative SF_ERR_* code. Creation
 *    also writes a NUL-terminated message into the caller's buffer `err` (`err_len` bytes,
 *    truncated if needed; either may be NULL/0).
 *  - Structs passed across the ABI start with `uint32_t struct_size`, set by the caller to
 *    sizeof(the struct it was compiled with). A library accepts any size up to its own (fields
 *    past the caller's size take their defaults / are not written) and refuses larger ones
 *    with SF_ERR_VERSION. Fields are only ever appended.
 *  - Step and stage functions return void: they never block, allocate, make a system call or
 *    fail. Misuse (a stage outside a step, an unknown id) is counted in the stats, not
 *    reported.
 *  - If the shared-memory segment cannot be used, creation still succeeds: the client records
 *    nothing, counts the steps it could not record, and sf_client_disabled_reason says why.
 *  - One thread drives a client at a time.
 */
// clang-format off
/* Example (compiled and run by tests/docs/c_api_example_test.c):
 *   sf_stage stages[] = {{"data", SF_STAGE_IO}, {"compute", SF_STAGE_COMPUTE},
 *                        {"allreduce", SF_STAGE_SYNC}};
 *   char err[256];
 *   sf_client* c = NULL;
 *   if (sf_client_create(NULL, stages, 3, &c, err, sizeof err) != SF_OK)
 *     fprintf(stderr, "%s\n", err);
 *   int32_t data = sf_stage_id(c, "data");
 *   sf_begin_step(c);
 *   sf_enter(c, data);
 *   load();
 *   sf_exit(c, data);
 *   ...
 *   sf_end_step(c);
 *   sf_client_destroy(c);
 */
// clang-format on
#ifndef STAGEFRONTIER_CLIENT_C_STAGEFRONTIER_C_H_
#define STAGEFRONTIER_CLIENT_C_STAGEFRONTIER_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SF_ABI_VERSION 1

#define SF_OK 0
#define SF_ERR_INVALID_ARGUMENT (-1)    /* bad schema, identity or options */
#define SF_ERR_VERSION (-2)             /* a struct_size larger than this library knows */
#define SF_ERR_INTERNAL (-3)            /* out of memory or another unexpected failure */
#define SF_ERR_FAILED_PRECONDITION (-4) /* not possible in this state */
#define SF_ERR_ALREADY_EXISTS (-5)      /* done already */

#define SF_STAGE_IO 0
#define SF_STAGE_COMPUTE 1
#define SF_STAGE_SYNC 2
#define SF_STAGE_MIXED 3
#define SF_STAGE_P2P 4    /* a pipeline send or receive (docs/user-guide.md "3D-parallel jobs") */
#define SF_STAGE_TENSOR 5 /* work with collectives over the tensor-parallel group (same) */

typedef struct sf_client sf_client;

typedef struct sf_stage {
  const char* name; /* 1..39 characters from [A-Za-z0-9_.-], unique */
  int32_t kind;     /* SF_STAGE_* */
} sf_stage;

typedef struct sf_client_options {
  uint32_t struct_size;     /* sizeof(sf_client_options) */
  const char* job_id;       /* NULL: STAGEFRONTIER_JOB_ID, TORCHELASTIC_RUN_ID, SLURM_JOB_ID */
  int32_t rank;             /* -1: from RANK (see docs/link-the-stub.md) */
  int32_t local_rank;       /* -1: from LOCAL_RANK */
  int32_t world_size;       /* -1: from WORLD_SIZE */
  int32_t local_world_size; /* -1: from LOCAL_WORLD_SIZE */
  const char* shm_dir;      /* NULL: STAGEFRONTIER_SHM_DIR or /dev/shm */
  const char* shm_group;    /* NULL: STAGEFRONTIER_SHM_GROUP or none (mode 0600) */
  int64_t ring_capacity;    /* -1: STAGEFRONTIER_RING_CAPACITY or 1024 */
  int32_t quiet;            /* nonzero: do not log why recording is disabled */
  /* Appended later (struct_size tells; an older struct declares no layout): where this rank
   * sits in a 3D-parallel job, sent to the coordinator once. All four 0: none declared.
   * pipeline_stages 0 with tensor_size >= 1: tensor parallelism only (one pipeline stage);
   * tensor_size 0 with pipeline_stages >= 1: 1. Checked at creation (SF_ERR_INVALID_ARGUMENT):
   * 0 <= pipeline_stage < pipeline_stages <= 65535, 0 <= tensor_rank < tensor_size <= 65535,
   * pipeline_stages * tensor_size divides the world size. */
  int32_t pipeline_stage;  /* 0 .. pipeline_stages - 1 */
  int32_t pipeline_stages; /* pipeline-parallel stages (0: no layout) */
  int32_t tensor_rank;     /* 0 .. tensor_size - 1 */
  int32_t tensor_size;     /* tensor-parallel group size (1: none) */
} sf_client_options;

typedef struct sf_client_stats {
  uint32_t struct_size; /* set by the caller */
  uint64_t steps_begun;
  uint64_t steps_recorded;
  uint64_t steps_dropped_full;
  uint64_t steps_not_recorded;
  uint64_t steps_paused;
  uint64_t steps_sampled_out;
  uint64_t misuse;
  uint64_t control_updates;
  uint64_t steps_invalid;     /* appended later (struct_size tells): steps refused unpublished */
  uint64_t selftest_steps;    /* appended later: steps a self-test delay was added to */
  uint64_t selftest_refused;  /* appended later: self-test requests refused */
  uint64_t captures_begun;    /* appended later: captures the begin callback started */
  uint64_t captures_done;     /* appended later: captures ended and answered done */
  uint64_t captures_failed;   /* appended later: failed (a callback error, steps missed) */
  uint64_t dumps_written;     /* appended later: hang dumps written and answered */
  uint64_t dumps_unrequested; /* appended later: dump signals without a request */
  uint64_t dump_errors;       /* appended later: hang dumps that could not be written */
} sf_client_stats;

/* Captures driven by the trainer's own profiler (Nsight through NVTX ranges, CUPTI, ...).
 * When the coordinator asks this rank for a trace of steps [first, last], the stub calls
 * `begin(user, step, last)` at the start of the first of those steps this trainer runs and
 * `end(user, first_run, last_run, &bytes)` at the end of the last one (or at the next step if
 * the request is withdrawn), on the thread that drives the client, then answers the
 * coordinator: running, done (with *bytes if the callback set it), or failed. A callback
 * returns 0 on success, anything else for a failure; it must be quick (it runs inside the
 * step) and must not throw. A request whose steps are already past when it arrives is
 * answered "missed" without a call. */
typedef struct sf_capture_callbacks {
  uint32_t struct_size; /* sizeof(sf_capture_callbacks) */
  int (*begin)(void* user, int64_t first_step, int64_t last_step);
  int (*end)(void* user, int64_t first_step, int64_t last_step, uint64_t* bytes);
  void* user;
} sf_capture_callbacks;

/* Returns SF_ABI_VERSION of the library actually loaded. */
uint32_t sf_abi_version(void);

/* Fills *options with defaults (everything from the environment; no rank layout). */
void sf_client_options_init(sf_client_options* options);

/* Creates a client. `options` may be NULL. On success returns SF_OK and sets *out; on failure
 * returns SF_ERR_*, sets *out to NULL and describes the problem in `err`. */
int sf_client_create(const sf_client_options* options, const sf_stage* stages, size_t stage_count,
                     sf_client** out, char* err, size_t err_len);

/* Releases the slot and frees the client. NULL is fine. */
void sf_client_destroy(sf_client* client);

/* Index of the stage called `name`, or -1. */
int32_t sf_stage_id(const sf_client* client, const char* name);

void sf_begin_step(sf_client* client); /* the step after the previous one */
void sf_begin_step_at(sf_client* client, int64_t step);
void sf_enter(sf_client* client, int32_t stage_id); /* stage scope begins */
void sf_exit(sf_client* client, int32_t stage_id);  /* stage scope ends */
void sf_mark(sf_client* client, int32_t stage_id);  /* stage ended now */
void sf_end_step(sf_client* client);
/* The trainer is ending on an error mid-step: call before exiting (abort, exit(1)), so that the
   coordinator reads this rank as gone where its open stage says, not as finished. */
void sf_note_uncaught_exception(sf_client* client);
/* The same, when the error is a collective's (the communication library's: a peer gone, an NCCL
   or Gloo failure): the rank raised waiting on its peers, so a hang verdict counts it among that
   collective's victims rather than naming it the cause. */
void sf_note_collective_exception(sf_client* client);

/* 1 if recording, 0 if disabled (or client is NULL). */
int sf_client_enabled(const sf_client* client);
/* Why recording is disabled; "" when enabled. Valid until the client is destroyed. */
const char* sf_client_disabled_reason(const sf_client* client);
/* 1 if the coordinator asked for a detailed trace of the current step. */
int sf_should_capture_trace(const sf_client* client);
/* Registers (replaces) the capture callbacks; NULL `callbacks` or a NULL `begin` removes
 * them (a capture still running is ended first). Returns SF_OK, SF_ERR_VERSION for a
 * struct_size larger than this library knows, SF_ERR_INVALID_ARGUMENT for a NULL client. */
int sf_set_capture_callbacks(sf_client* client, const sf_capture_callbacks* callbacks);
/* Hang dumps: lets the coordinator ask this rank for its stacks when the job hangs. Installs
 * a handler for `signal_number` (SIGUSR1 or SIGUSR2; 0: SIGUSR2) and starts a thread of the
 * stub; on a request the sidecar signals the process and that thread writes
 * <capture dir>/<job>/stacks_rank<R>_capture<ID>.txt ("# " header lines: job, rank, pid,
 * capture id, open stage and step, wall time), then calls `callback(user, capture_id, fd)`
 * (may be NULL), on that thread, to append what the trainer knows (its own backtraces, the
 * state of its runtime) by writing into `fd`; the callback must not close `fd`.
 * THE CALLBACK MUST NOT BLOCK, nor take a lock the training thread may hold: it runs while the
 * trainer is hung (perhaps holding that lock), and sf_client_destroy waits for it without a
 * time limit; write what is at hand (counters, state read with atomics or try-locks) and
 * return. Folders are created 0777 and files 0666, less the umask. The capture dir is
 * STAGEFRONTIER_CAPTURE_DIR, else <segment dir>/stagefrontier-captures. Returns SF_OK;
 * SF_ERR_INVALID_ARGUMENT for another signal (or a NULL client); SF_ERR_FAILED_PRECONDITION
 * if the client is not recording or the signal already has a handler other than
 * SIG_DFL/SIG_IGN; SF_ERR_ALREADY_EXISTS if enabled already; sf_client_last_error says why.
 * Undone by sf_client_destroy (which first stops the sidecar from signalling). */
int sf_enable_hang_dumps(sf_client* client, int signal_number,
                         void (*callback)(void* user, uint64_t capture_id, int fd), void* user);
/* The message of the latest failed call on this client that returns SF_ERR_* without an
 * `err` buffer (sf_enable_hang_dumps); "" if none. Valid until the next call on the client. */
const char* sf_client_last_error(const sf_client* client);
/* Copies the counters into *stats (stats->struct_size set by the caller). */
int sf_client_get_stats(const sf_client* client, sf_client_stats* stats);

#ifdef __cplusplus
}
#endif

#endif /* STAGEFRONTIER_CLIENT_C_STAGEFRONTIER_C_H_ */
