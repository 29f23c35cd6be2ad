/* The usage example of client/c/stagefrontier_c.h's banner, as C: the block between the
 * "example" comments is the header's, with only its "..." filled in. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "client/c/stagefrontier_c.h"

static int loads = 0;
static void load(void) { ++loads; }

int main(void) {
  /* The segment goes to the test's own directory, not /dev/shm. */
  const char* tmp = getenv("TEST_TMPDIR");
  setenv("STAGEFRONTIER_SHM_DIR", tmp ? tmp : "/tmp", 1);
  setenv("STAGEFRONTIER_JOB_ID", "c_api_example", 1);

  /* --- example (client/c/stagefrontier_c.h) --- */
  sf_stage stages[] = {
      {"data", SF_STAGE_IO}, {"compute", SF_STAGE_COMPUTE}, {"allreduce", SF_STAGE_SYNC}};
  char err[256];
  sf_client* c = NULL;
  if (sf_client_create(NULL, stages, 3, &c, err, sizeof err) != SF_OK) fprintf(stderr, "%s\n", err);
  int32_t data = sf_stage_id(c, "data");
  sf_begin_step(c);
  sf_enter(c, data);
  load();
  sf_exit(c, data);
  /* ... */
  sf_end_step(c);
  sf_client_destroy(c);
  /* --- end of example --- */

  if (c == NULL || data < 0 || loads != 1) {
    fprintf(stderr, "FAILED: client %p, stage id %d, loads %d\n", (void*)c, (int)data, loads);
    return 1;
  }
  return 0;
}
