/* The C ABI from C: error convention, NULL handles, versioned struct sizes. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client/c/stagefrontier_c.h"

static int failures = 0;
#define EXPECT(cond)                                                     \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                        \
    }                                                                    \
  } while (0)

/* What a caller compiled against an older, shorter sf_client_stats would pass. */
typedef struct {
  uint32_t struct_size;
  uint64_t steps_begun;
  uint64_t steps_recorded;
  uint64_t sentinel; /* not part of the old struct: must stay untouched */
} old_stats;

static int capture_begin(void* user, int64_t first, int64_t last) {
  (void)user;
  return first <= last ? 0 : -1;
}
static int capture_end(void* user, int64_t first, int64_t last, uint64_t* bytes) {
  (void)user;
  (void)first;
  (void)last;
  *bytes = 0;
  return 0;
}

static void dump_callback(void* user, uint64_t capture_id, int fd) {
  char line[128];
  snprintf(line, sizeof line, "%s (capture %llu)\n", (const char*)user,
           (unsigned long long)capture_id);
  if (write(fd, line, strlen(line)) < 0) {
  }
}

static void trainer_usr1(int sig) { (void)sig; }

/* The sidecar's part of a hang dump: the request id into the slot (segment-format.md: slot at
 * slots_offset + local_rank * slot_bytes, dump_request_id at +1688), then the signal. */
static int request_dump(const char* segment_path, uint32_t local_rank, uint64_t id) {
  const int fd = open(segment_path, O_RDWR);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0) return -1;
  char* base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return -1;
  uint64_t slots_offset, slot_bytes;
  memcpy(&slots_offset, base + 128, sizeof slots_offset);
  memcpy(&slot_bytes, base + 40, sizeof slot_bytes);
  uint64_t* request = (uint64_t*)(base + slots_offset + local_rank * slot_bytes + 1688);
  __atomic_store_n(request, id, __ATOMIC_RELEASE);
  munmap(base, (size_t)st.st_size);
  return raise(SIGUSR2);
}

/* `n` bytes at offset `at` of a slot (segment-format.md: slot at slots_offset + local_rank *
 * slot_bytes). */
static int read_slot(const char* segment_path, uint32_t local_rank, size_t at, void* out,
                     size_t n) {
  const int fd = open(segment_path, O_RDONLY);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0) return -1;
  char* base = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return -1;
  uint64_t slots_offset, slot_bytes;
  memcpy(&slots_offset, base + 128, sizeof slots_offset);
  memcpy(&slot_bytes, base + 40, sizeof slot_bytes);
  memcpy(out, base + slots_offset + local_rank * slot_bytes + at, n);
  munmap(base, (size_t)st.st_size);
  return 0;
}

/* The rank layout of a slot (four u16 at slot offset 56). */
static int read_layout(const char* segment_path, uint32_t local_rank, uint16_t out[4]) {
  return read_slot(segment_path, local_rank, 56, out, 4 * sizeof(uint16_t));
}

/* Why the slot's owner said it ended (u32 at slot offset 1656; segment-format.md "Exit
 * reason"). */
static uint32_t read_exit_reason(const char* segment_path, uint32_t local_rank) {
  uint32_t reason = 99;
  if (read_slot(segment_path, local_rank, 1656, &reason, sizeof reason) != 0) return 98;
  return reason;
}

/* The file's content once it exists (polled up to 5 s), or "". */
static void read_when_there(const char* path, char* out, size_t n) {
  out[0] = '\0';
  const struct timespec ms10 = {0, 10 * 1000 * 1000};
  for (int i = 0; i < 500; ++i) {
    FILE* f = fopen(path, "r");
    if (f != NULL) {
      const size_t got = fread(out, 1, n - 1, f);
      out[got] = '\0';
      fclose(f);
      return;
    }
    nanosleep(&ms10, NULL);
  }
}

int main(void) {
  const char* tmp = getenv("TEST_TMPDIR");
  setenv("STAGEFRONTIER_SHM_DIR", tmp ? tmp : "/tmp", 1);
  setenv("STAGEFRONTIER_JOB_ID", "cabi", 1);
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  EXPECT(sf_abi_version() == SF_ABI_VERSION);

  const sf_stage stages[] = {{"data", SF_STAGE_IO}, {"step", SF_STAGE_COMPUTE}};
  char err[128] = "";
  sf_client* c = NULL;
  EXPECT(sf_client_create(NULL, stages, 2, &c, err, sizeof err) == SF_OK);
  EXPECT(c != NULL);
  EXPECT(sf_client_enabled(c) == 1);
  EXPECT(strcmp(sf_client_disabled_reason(c), "") == 0);
  EXPECT(sf_stage_id(c, "step") == 1);
  EXPECT(sf_stage_id(c, "nope") == -1);
  for (int i = 0; i < 3; ++i) {
    sf_begin_step(c);
    sf_enter(c, 0);
    sf_exit(c, 0);
    sf_mark(c, 1);
    sf_end_step(c);
  }
  sf_enter(c, -1); /* outside a step and unknown: counted, ignored */
  sf_client_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  EXPECT(sf_client_get_stats(c, &st) == SF_OK);
  EXPECT(st.steps_begun == 3);
  EXPECT(st.steps_recorded == 3);
  EXPECT(st.misuse == 1);

  old_stats old;
  memset(&old, 0, sizeof old);
  old.struct_size = offsetof(old_stats, sentinel);
  old.sentinel = 0xdeadbeef;
  EXPECT(sf_client_get_stats(c, (sf_client_stats*)&old) == SF_OK);
  EXPECT(old.steps_begun == 3);
  EXPECT(old.steps_recorded == 3);
  EXPECT(old.sentinel == 0xdeadbeef);

  st.struct_size = sizeof st + 8; /* from a newer header than this library */
  EXPECT(sf_client_get_stats(c, &st) == SF_ERR_VERSION);

  /* Capture callbacks: registered, replaced, removed; a newer struct is refused. (What the
   * stub does with them is checked in client_test.cc, through the same C++ client.) */
  sf_capture_callbacks cb;
  memset(&cb, 0, sizeof cb);
  cb.struct_size = sizeof cb;
  cb.begin = capture_begin;
  cb.end = capture_end;
  EXPECT(sf_set_capture_callbacks(c, &cb) == SF_OK);
  EXPECT(sf_set_capture_callbacks(c, NULL) == SF_OK);
  cb.struct_size = sizeof cb + 8;
  EXPECT(sf_set_capture_callbacks(c, &cb) == SF_ERR_VERSION);
  EXPECT(sf_set_capture_callbacks(NULL, NULL) == SF_ERR_INVALID_ARGUMENT);
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  EXPECT(sf_client_get_stats(c, &st) == SF_OK);
  EXPECT(st.captures_begun == 0 && st.captures_failed == 0);

  /* Hang dumps: refused signals, enabled once, a requested dump with the callback's text. */
  char path[512];
  snprintf(path, sizeof path, "%s/captures", tmp ? tmp : "/tmp");
  setenv("STAGEFRONTIER_CAPTURE_DIR", path, 1);
  EXPECT(sf_enable_hang_dumps(NULL, 0, NULL, NULL) == SF_ERR_INVALID_ARGUMENT);
  EXPECT(sf_enable_hang_dumps(c, SIGKILL, NULL, NULL) == SF_ERR_INVALID_ARGUMENT);
  EXPECT(strstr(sf_client_last_error(c), "SIGUSR2") != NULL);
  /* A signal the trainer handles already is refused, and its handler left alone. */
  struct sigaction mine, before, after;
  memset(&mine, 0, sizeof mine);
  mine.sa_handler = trainer_usr1;
  sigemptyset(&mine.sa_mask);
  EXPECT(sigaction(SIGUSR1, &mine, &before) == 0);
  EXPECT(sf_enable_hang_dumps(c, SIGUSR1, NULL, NULL) == SF_ERR_FAILED_PRECONDITION);
  EXPECT(strstr(sf_client_last_error(c), "SIGUSR1") != NULL);
  sigaction(SIGUSR1, NULL, &after);
  EXPECT(after.sa_handler == trainer_usr1);
  EXPECT(sigaction(SIGUSR1, &before, NULL) == 0);
  EXPECT(sf_enable_hang_dumps(c, 0, dump_callback, "trainer state: ok") == SF_OK);
  EXPECT(strcmp(sf_client_last_error(c), "") == 0);
  EXPECT(sf_enable_hang_dumps(c, SIGUSR2, NULL, NULL) == SF_ERR_ALREADY_EXISTS);
  EXPECT(strstr(sf_client_last_error(c), "already") != NULL);
  snprintf(path, sizeof path, "%s/stagefrontier.cabi.seg", tmp ? tmp : "/tmp");
  EXPECT(request_dump(path, 0, 21) == 0);
  snprintf(path, sizeof path, "%s/captures/cabi/stacks_rank0_capture21.txt", tmp ? tmp : "/tmp");
  char text[4096];
  read_when_there(path, text, sizeof text);
  EXPECT(strstr(text, "# capture id: 21\n") != NULL);
  EXPECT(strstr(text, "# from the trainer's callback:\ntrainer state: ok (capture 21)\n") != NULL);
  unsetenv("STAGEFRONTIER_CAPTURE_DIR");
  sf_client_destroy(c); /* tears the dumper down: the handler is gone */
  struct sigaction now;
  sigaction(SIGUSR2, NULL, &now);
  EXPECT(now.sa_handler == SIG_DFL);

  /* Errors come back as codes plus a message. */
  const sf_stage dup[] = {{"a", SF_STAGE_IO}, {"a", SF_STAGE_IO}};
  c = (sf_client*)0x1;
  EXPECT(sf_client_create(NULL, dup, 2, &c, err, sizeof err) == SF_ERR_INVALID_ARGUMENT);
  EXPECT(c == NULL);
  EXPECT(strstr(err, "\"a\"") != NULL);
  /* A pipeline send or receive is kind p2p (4), a tensor-parallel layer tensor (5); 6 is
     outside the kinds. */
  const sf_stage p2p[] = {
      {"recv", SF_STAGE_P2P}, {"fwd", SF_STAGE_TENSOR}, {"sync", SF_STAGE_SYNC}};
  EXPECT(sf_client_create(NULL, p2p, 3, &c, err, sizeof err) != SF_ERR_INVALID_ARGUMENT);
  if (c != NULL) {
    sf_client_destroy(c);
    c = NULL;
  }
  const sf_stage kind6[] = {{"a", 6}};
  EXPECT(sf_client_create(NULL, kind6, 1, &c, err, sizeof err) == SF_ERR_INVALID_ARGUMENT);
  const sf_stage badkind[] = {{"a", 9}};
  EXPECT(sf_client_create(NULL, badkind, 1, &c, err, sizeof err) == SF_ERR_INVALID_ARGUMENT);
  EXPECT(strstr(err, "kind outside") != NULL);
  char tiny[8];
  EXPECT(sf_client_create(NULL, badkind, 1, &c, tiny, sizeof tiny) == SF_ERR_INVALID_ARGUMENT);
  EXPECT(strlen(tiny) == 7); /* truncated, still terminated */

  /* Options: defaults, a shorter (older) struct, a longer (newer) one. */
  sf_client_options o;
  sf_client_options_init(&o);
  EXPECT(o.rank == -1 && o.ring_capacity == -1);
  o.job_id = "cabi2";
  o.quiet = 1;
  o.shm_dir = "/nonexistent-dir";
  EXPECT(sf_client_create(&o, stages, 2, &c, err, sizeof err) == SF_OK);
  EXPECT(sf_client_enabled(c) == 0); /* no segment: a counting no-op */
  EXPECT(strstr(sf_client_disabled_reason(c), "/nonexistent-dir") != NULL);
  sf_begin_step(c);
  sf_end_step(c);
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  sf_client_get_stats(c, &st);
  EXPECT(st.steps_not_recorded == 1);
  sf_client_destroy(c);
  o.struct_size = offsetof(sf_client_options, shm_dir); /* an old caller: no shm_dir field */
  EXPECT(sf_client_create(&o, stages, 2, &c, err, sizeof err) == SF_OK);
  EXPECT(sf_client_enabled(c) == 1); /* shm_dir ignored: the environment's directory */
  sf_client_destroy(c);
  o.struct_size = sizeof o + 16;
  EXPECT(sf_client_create(&o, stages, 2, &c, err, sizeof err) == SF_ERR_VERSION);

  /* The rank layout: written into the slot; refused when inconsistent; an older struct (one
   * that ends before the layout fields) declares none, whatever its tail holds. */
  {
    char seg[512];
    snprintf(seg, sizeof seg, "%s/stagefrontier.cabi3.seg", tmp ? tmp : "/tmp");
    sf_client_options lo;
    sf_client_options_init(&lo);
    EXPECT(lo.pipeline_stage == 0 && lo.pipeline_stages == 0 && lo.tensor_rank == 0 &&
           lo.tensor_size == 0);
    lo.job_id = "cabi3";
    lo.rank = 5;
    lo.local_rank = 1;
    lo.world_size = 8;
    lo.quiet = 1;
    lo.pipeline_stage = 1;
    lo.pipeline_stages = 2;
    lo.tensor_rank = 1;
    lo.tensor_size = 2;
    EXPECT(sf_client_create(&lo, stages, 2, &c, err, sizeof err) == SF_OK);
    EXPECT(sf_client_enabled(c) == 1);
    uint16_t got[4] = {9, 9, 9, 9};
    EXPECT(read_layout(seg, 1, got) == 0);
    EXPECT(got[0] == 1 && got[1] == 2 && got[2] == 1 && got[3] == 2);
    sf_client_destroy(c);
    lo.tensor_size = 3; /* 2 x 3 does not divide 8 */
    EXPECT(sf_client_create(&lo, stages, 2, &c, err, sizeof err) == SF_ERR_INVALID_ARGUMENT);
    EXPECT(c == NULL);
    EXPECT(strstr(err, "tensor_size 3") != NULL);
    lo.tensor_size = 2;
    lo.pipeline_stage = 2;
    EXPECT(sf_client_create(&lo, stages, 2, &c, err, sizeof err) == SF_ERR_INVALID_ARGUMENT);
    EXPECT(strstr(err, "pipeline_stage 2") != NULL);
    /* An old caller: its struct ended after `quiet` (the bytes beyond are not its own). */
    lo.struct_size = offsetof(sf_client_options, pipeline_stages);
    EXPECT(sf_client_create(&lo, stages, 2, &c, err, sizeof err) == SF_OK);
    EXPECT(read_layout(seg, 1, got) == 0);
    EXPECT(got[0] == 0 && got[1] == 0 && got[2] == 0 && got[3] == 0); /* cleared by the claim */
    sf_client_destroy(c);
  }

  /* An uncaught exception is said in the slot (1), a collective's as such (2); a claim clears
   * it. */
  {
    char seg[512];
    snprintf(seg, sizeof seg, "%s/stagefrontier.cabi4.seg", tmp ? tmp : "/tmp");
    sf_client_options eo;
    sf_client_options_init(&eo);
    eo.job_id = "cabi4";
    eo.quiet = 1;
    EXPECT(sf_client_create(&eo, stages, 2, &c, err, sizeof err) == SF_OK);
    EXPECT(read_exit_reason(seg, 0) == 0);
    sf_note_uncaught_exception(c);
    EXPECT(read_exit_reason(seg, 0) == 1);
    sf_client_destroy(c);
    EXPECT(read_exit_reason(seg, 0) == 1); /* kept past the release, for the sidecar */
    EXPECT(sf_client_create(&eo, stages, 2, &c, err, sizeof err) == SF_OK);
    EXPECT(read_exit_reason(seg, 0) == 0);
    sf_note_collective_exception(c);
    EXPECT(read_exit_reason(seg, 0) == 2);
    sf_client_destroy(c);
    EXPECT(read_exit_reason(seg, 0) == 2);
  }

  /* A NULL handle is always safe. */
  sf_begin_step(NULL);
  sf_enter(NULL, 0);
  sf_end_step(NULL);
  sf_note_uncaught_exception(NULL);
  sf_note_collective_exception(NULL);
  sf_client_destroy(NULL);
  EXPECT(sf_stage_id(NULL, "a") == -1);
  EXPECT(sf_client_get_stats(NULL, &st) == SF_ERR_INVALID_ARGUMENT);
  EXPECT(sf_client_create(NULL, stages, 2, NULL, err, sizeof err) == SF_ERR_INVALID_ARGUMENT);

  if (failures == 0) printf("c_abi_test: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
